"""A private, small /dev/shm: reproduce a container's shared-memory limit on any Linux machine, without root.

DataLoader workers hand batches to the main process through /dev/shm, and containers often
get a small one (Docker's default is 64 MB), so a loader that runs on a workstation can fail
in a container. `private_shm` moves the calling process into its own user and mount namespace
(which Linux lets an unprivileged user create where user namespaces are enabled) and mounts a
fresh tmpfs of the size asked on /dev/shm there. The process and everything it starts later,
DataLoader workers included, see only the small one; the rest of the machine keeps its own.

Call it first thing in a fresh process, before importing torch (which starts threads): the
kernel refuses to move a process that runs more than one thread into a new user namespace.
Later calls in the same process only mount another fresh tmpfs over the last one, so one
process can try several sizes.
"""

from __future__ import annotations

import ctypes
import os
import sys

from labkit.core.errors import LabkitError, LabkitValueError

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_SHM = b"/dev/shm"

_entered = False  # True once this process is in its own namespaces


class PrivateShmUnavailable(LabkitError, OSError):
    """This OS or its settings do not let an unprivileged process mount its own /dev/shm."""


def _libc_call(name: str, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise PrivateShmUnavailable(errno, f"{name}() failed: {os.strerror(errno)}")


def _enter_namespaces() -> None:
    uid, gid = os.getuid(), os.getgid()
    try:
        _libc_call("unshare", _CLONE_NEWUSER | _CLONE_NEWNS)
    except PrivateShmUnavailable as e:
        raise PrivateShmUnavailable(e.errno, f"{e.strerror}; unprivileged user namespaces are disabled here "
                                    "(sysctl kernel.unprivileged_userns_clone or user.max_user_namespaces), "
                                    "or this process already runs several threads") from None
    # Map our own user and group to root inside the namespace, which may then mount.
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
            f.write(text)
    # Keep every mount made from now on inside this namespace.
    _libc_call("mount", b"none", b"/", None, _MS_REC | _MS_PRIVATE, None)


def private_shm(size_bytes: int) -> None:
    """Give this process (and its future children) an empty /dev/shm of ``size_bytes``.

    Raises `PrivateShmUnavailable` with the reason where the OS does not allow it
    (not Linux, user namespaces disabled, a seccomp profile that forbids ``unshare``).
    """
    global _entered
    if size_bytes < 4096:
        raise LabkitValueError(f"size_bytes={size_bytes}: a tmpfs needs at least one 4096-byte page")
    if not sys.platform.startswith("linux"):
        raise PrivateShmUnavailable(0, f"a private /dev/shm needs Linux namespaces; this is {sys.platform}")
    if not _entered:
        _enter_namespaces()
        _entered = True
    _libc_call("mount", b"tmpfs", _SHM, b"tmpfs", 0, f"size={size_bytes}".encode())
