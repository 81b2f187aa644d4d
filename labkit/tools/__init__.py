"""The labkit command line and the pack fuzzer.

Import rule: labkit.tools may use everything; no other labkit package imports it (labkit/__main__.py runs its
command line).

The layers run core -> decode -> storage -> datasets -> samplers -> collate -> workers -> device ->
distributed, and each imports only those to its left. measure reads every layer; diagnose reads every layer
and measure; bench uses all of those; course and tools may use everything; nothing imports course or tools.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "main": "cli",
})
