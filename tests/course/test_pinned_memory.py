"""Notebook 04's facts about page-locked memory: the locked-memory limit, CAP_IPC_LOCK, what pinning does here."""

from __future__ import annotations

import sys

import pytest
import torch

from labkit.course.pinned_memory import LockLimit, cap_ipc_lock, lock_limit, pinning_here


def _status(tmp_path, cap_eff):
    path = tmp_path / "status"
    path.write_text(f"Name:\tpython\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\n", encoding="ascii")
    return str(path)


def test_cap_ipc_lock_reads_bit_14_of_the_effective_set(tmp_path):
    assert cap_ipc_lock(_status(tmp_path, "000001fffeffffff")) is True
    assert cap_ipc_lock(_status(tmp_path, "0000000000004000")) is True
    assert cap_ipc_lock(_status(tmp_path, "0000000000000000")) is False
    assert cap_ipc_lock(_status(tmp_path, "000001fffeffbfff")) is False
    assert cap_ipc_lock(str(tmp_path / "missing")) is None
    assert cap_ipc_lock(_status(tmp_path, "not-hex")) is None


def test_describe_says_the_limit_and_the_exemption():
    assert LockLimit(8 * 2**20, 8 * 2**20, True).describe() == (
        "locked-memory limit (ulimit -l): 8 MiB; this process has CAP_IPC_LOCK, so mlock may lock more than that"
    )
    assert LockLimit(64 * 2**10, None, False).describe() == (
        "locked-memory limit (ulimit -l): 64 KiB (hard limit unlimited); this process has no CAP_IPC_LOCK, "
        "so mlock stops at that"
    )
    assert LockLimit(None, None, None).describe() == "locked-memory limit (ulimit -l): unlimited"


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has no RLIMIT_MEMLOCK")
def test_lock_limit_is_this_process_s_rlimit():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    limit = lock_limit()
    assert limit is not None
    assert limit.soft == (None if soft == resource.RLIM_INFINITY else soft)
    assert limit.hard == (None if hard == resource.RLIM_INFINITY else hard)
    if sys.platform.startswith("linux"):
        assert limit.exempt is cap_ipc_lock()


def test_pinning_here_says_what_torch_does():
    said = pinning_here()
    if torch.cuda.is_available():
        assert said == "works"
    else:
        assert said == "works" or said.startswith("raises ")
