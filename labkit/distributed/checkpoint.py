"""Checkpoints that survive a kill at any instant, and the loader state to put in them.

A job killed while writing its checkpoint (preemption, the out-of-memory killer, a node
lost) must find the last good one on restart, never half of a new one. `save_checkpoint`
writes to a temporary file beside the target, flushes and fsyncs it, renames it over the
target in one step (``os.replace``) and fsyncs the directory so the rename itself survives a
power cut. A reader therefore sees the old file or the new one, whole.

The file is a short header (magic, length, CRC32) followed by ``torch.save`` bytes, so a
file cut short or damaged after it was written (a copy that stopped, a bad disk) is
refused with a message naming it, instead of resuming from garbage. `load_checkpoint`
unpickles with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists, tuples
and dicts come back; a checkpoint that asks for any other object is refused and no code
in it runs.

The loader's half of the state comes from the loader itself (`labkit.workers.stateful_loader`):
``save_checkpoint({"model": ..., "loader": loader.state_dict()}, path)``.
"""

from __future__ import annotations

import io
import os
import re
import struct
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

from labkit.core.atomic import atomic_file
from labkit.core.errors import LabkitError
from labkit.core.string_table import PathLike

MAGIC = b"LKCKPT01"
HEADER_STRUCT = struct.Struct("<QI")  # payload length, CRC32 of the payload


class CheckpointError(LabkitError, RuntimeError):
    """A checkpoint file cannot be used; the message names the file, what is wrong and what to do."""


_PLAIN = (torch.Tensor, int, float, bool, complex, str, bytes, type(None), torch.dtype, torch.device, torch.Size)


def _loads_back(value: Any) -> bool:
    """Whether ``torch.load(weights_only=True)`` rebuilds ``value`` (its own rules, safe globals included)."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    try:
        torch.load(buffer, weights_only=True)
    except Exception:  # UnpicklingError or RuntimeError, depending on where torch.load stopped
        return False
    return True


def _unloadable(value: Any, where: str) -> tuple[str, Any] | None:
    """The first value inside ``value`` that `load_checkpoint` would refuse, and where it is; None if none."""
    if isinstance(value, _PLAIN):
        return None
    if isinstance(value, (dict, list, tuple)) and type(value) in (dict, list, tuple, OrderedDict):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found = _unloadable(item, f"{where}[{key!r}]")
            if found is not None:
                return found
        return None
    return None if _loads_back(value) else (where, value)


def _refuse_unloadable(state: Mapping[str, Any], path: str) -> None:
    found = _unloadable(dict(state), "state")
    if found is None:
        return
    where, value = found
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    hint = (
        " (argparse's: save vars(args) instead)"
        if kind == "argparse.Namespace"
        else " (numpy's: save .tolist(), .item() or torch.from_numpy(...) instead)"
        if kind.startswith("numpy")
        else ""
    )
    raise CheckpointError(
        f"{path}: not saved: {where} is of type {kind}{hint}, which load_checkpoint would refuse at "
        "resume (it builds only tensors, numbers, strings, lists, tuples and dicts, so no code in "
        "the file ever runs); save plain values or state_dict()s there"
    )


def save_checkpoint(state: Mapping[str, Any], path: PathLike) -> None:
    """Write ``state`` to ``path`` atomically: after a crash at any point, ``path`` holds the previous
    checkpoint or this one, whole. One process should write a given path (rank 0, say); temporary
    files of writers that died are removed first. A checkpoint that does not fit beside the previous one is
    refused before anything is written (`DiskFullError`, both sizes named), and a disk that fills while it is
    written leaves the previous checkpoint as it was. ``state`` should hold only tensors, numbers, strings,
    lists, tuples and dicts (model and optimizer ``state_dict()``s do): anything else would not load, so it is
    refused here, naming its key, not at the resume hours later."""
    path = os.fspath(path)
    _refuse_unloadable(state, path)
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    payload = buffer.getbuffer()
    with atomic_file(path, size=len(MAGIC) + HEADER_STRUCT.size + len(payload), what="the checkpoint") as f:
        f.write(MAGIC + HEADER_STRUCT.pack(len(payload), zlib.crc32(payload)))
        f.write(payload)


def load_checkpoint(path: PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The state `save_checkpoint` wrote to ``path``; `CheckpointError` if the file is not one, is
    truncated or damaged, or asks to build objects other than tensors and plain containers."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    start = len(MAGIC) + HEADER_STRUCT.size
    if len(data) < start or not data.startswith(MAGIC):
        raise CheckpointError(
            f"{path} is not a labkit checkpoint (no {MAGIC!r} header): "
            "pass a file written by labkit.distributed.checkpoint.save_checkpoint"
        )
    length, crc = HEADER_STRUCT.unpack_from(data, len(MAGIC))
    payload = memoryview(data)[start:]
    if len(payload) != length:
        raise CheckpointError(
            f"{path} is truncated or padded: {len(payload)} bytes of state where its header "
            f"says {length}; it was cut off after it was written (an interrupted copy?): "
            "resume from an earlier checkpoint"
        )
    if zlib.crc32(payload) != crc:
        raise CheckpointError(
            f"{path} is damaged: its checksum does not match its contents; check the disk "
            "and resume from an earlier checkpoint"
        )
    try:
        state = torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    except Exception as error:  # UnpicklingError or RuntimeError, depending on where torch.load stopped
        named = re.search(r"Unsupported global: GLOBAL (\S+)", str(error))
        if named:
            raise CheckpointError(
                f"{path} asks for {named.group(1)}, and load_checkpoint builds only tensors, "
                "numbers, strings, lists, tuples and dicts (no code in the file ran): save "
                "state_dict()s, with numpy values turned into int/float or tensors"
            ) from error
        raise CheckpointError(
            f"{path} passed its checksum but torch.load cannot read it ({error}): it was not "
            "written by save_checkpoint, or by a torch this one cannot read"
        ) from error
    return state
