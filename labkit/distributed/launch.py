"""Starting ``torchrun`` from Python: the command line, and the environment it needs on this OS.

A notebook or ``labkit ddp-demo`` launches ranks as a subprocess (``python -m torch.distributed.run``, which is
what the ``torchrun`` script runs) so that a hung rank cannot hang the caller. One platform fact lives here: from
torch 2.4 the rendezvous store of ``--standalone`` runs on libuv by default, which torch's Windows builds lack; there
the launch fails before any rank starts unless ``USE_LIBUV=0`` is set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

import torch

from labkit.core.errors import LabkitValueError

#: The first torch release whose rendezvous store defaults to libuv.
LIBUV_DEFAULT_FROM = (2, 4)


def torch_release(version: str = torch.__version__) -> tuple[int, int]:
    """(major, minor) of a torch version string such as ``"2.4.1+cu121"``."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def torchrun_env(
    base: Mapping[str, str] | None = None, platform: str = sys.platform, version: str = torch.__version__
) -> dict[str, str]:
    """The environment to launch ``torchrun`` with: ``base`` (this process's by default), plus ``USE_LIBUV=0`` on
    Windows with torch 2.4 or later (unless the caller set ``USE_LIBUV`` already)."""
    env = dict(os.environ if base is None else base)
    if platform.startswith("win") and torch_release(version) >= LIBUV_DEFAULT_FROM:
        env.setdefault("USE_LIBUV", "0")
    return env


def torchrun_command(module: str, args: Sequence[str] = (), nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node=N -m MODULE ARGS...`` with this
    interpreter: one node, ``nproc`` ranks."""
    if nproc < 1:
        raise LabkitValueError(f"nproc={nproc}: torchrun needs at least one rank per node")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        module,
        *map(str, args),
    ]
