"""An append-only log of small JSON records that every process of a DataLoader can write to.

DataLoader workers are separate processes: a list they append to stays in the worker. Each
record here is one ``O_APPEND`` write of one JSON line to a temporary file, which the kernel
keeps whole for lines this short, so records from the main process and all workers land in
one place whatever the start method. The process that created the log deletes the file.
"""

from __future__ import annotations

import json
import os
import tempfile
import weakref
from typing import Any


def _unlink_if_owner(path: str, owner: int) -> None:
    if os.getpid() == owner and os.path.exists(path):
        os.unlink(path)


_CLEARED = {"_cleared": True}


class SharedLog:
    """JSON-lines log shared by a process and the workers it hands this object to (it pickles as its path)."""

    def __init__(self, prefix: str = "labkit-log-") -> None:
        # the creator's pid in the name: who left a file behind can be told, and a process's own told apart
        fd, self.path = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=".jsonl")
        os.close(fd)
        weakref.finalize(self, _unlink_if_owner, self.path, os.getpid())

    def __getstate__(self) -> dict[str, str]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.path = state["path"]

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def mark(self) -> int:
        """A position in the log: `records` from it returns only what was appended after."""
        return os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def records(self, since: int = 0) -> list[dict[str, Any]]:
        """What was appended after the mark ``since`` and after the last `clear`, oldest first."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(since)
            found = [json.loads(line) for line in f.read().decode("utf-8").splitlines() if line.strip()]
        cleared = max((k + 1 for k, r in enumerate(found) if r == _CLEARED), default=0)
        return found[cleared:]

    def clear(self) -> None:
        """Forget what was logged so far. A marker is appended, not the file emptied, so marks taken
        before stay valid byte offsets."""
        self.append(_CLEARED)
