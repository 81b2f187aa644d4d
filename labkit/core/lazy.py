"""Package faces that import nothing until a name is used (PEP 562).

Every ``__init__`` of labkit names what it offers and imports it on first use. An eager face would
import torch the moment any part of labkit is imported, and some parts must run before torch is
loaded: `labkit.diagnose.small_shm.private_shm` needs a process with one thread (torch starts
threads), and ``import labkit`` in a command-line tool should cost milliseconds, not seconds.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing costs 4 ms to import, and ``import labkit`` should not pay it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, whose names are found in the modules
    ``exports`` maps them to (a module path relative to ``package``, or absolute from ``labkit.``)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        path = module if module.startswith("labkit.") else f"{package}.{module}"
        value = getattr(importlib.import_module(path), name)
        setattr(sys.modules[package], name, value)  # found once; later uses do not come here
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return sorted(exports), __getattr__, __dir__
