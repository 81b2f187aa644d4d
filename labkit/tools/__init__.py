"""The labkit command line and the pack fuzzer.

Import rule: labkit.tools may use everything; no other labkit package imports it (labkit/__main__.py runs its
command line).

The order of the layers, and what each may import, is the package's own docstring (``labkit``).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "main": "cli",
})
