"""The layers of labkit, in the order the data flows, and what each may import: the one place this is written.

The package test (``tests/project/test_package.py``) holds every module to it, the API reference
(``scripts/api_reference.py``) orders its sections by it, and ``docs/modules.md`` shows `layer_table`'s rendering
of it (a test keeps the two equal). Package docstrings say what their package holds, not this rule again.
"""

from __future__ import annotations

#: The layers the data passes through, in order: each may import itself and those before it; ``core`` no other.
CHAIN: tuple[str, ...] = (
    "core",
    "decode",
    "storage",
    "datasets",
    "samplers",
    "collate",
    "workers",
    "device",
    "distributed",
)

#: Every sub-package, in the order the reference shows them, with what it may import besides itself: ``measure``
#: reads every layer and changes none, ``diagnose`` reads the layers and the measurements, ``harness`` (the data
#: folder, the photo-like data, the ablation) stands on all of them, ``course`` holds what only the notebooks need,
#: ``tools`` the labkit command; nothing imports those last two.
LAYERS: dict[str, frozenset[str]] = {
    **{layer: frozenset(CHAIN[:k]) for k, layer in enumerate(CHAIN)},
    "measure": frozenset(CHAIN),
    "diagnose": frozenset(CHAIN) | {"measure"},
    "harness": frozenset(CHAIN) | {"measure", "diagnose"},
    "course": frozenset(CHAIN) | {"measure", "diagnose", "harness"},
    "tools": frozenset(CHAIN) | {"measure", "diagnose", "harness", "course"},
}


def may_import(package: str) -> frozenset[str]:
    """The labkit sub-packages a module of ``package`` may import, its own included."""
    return LAYERS[package] | {package}


def layer_table() -> str:
    """`LAYERS` as a markdown table: each sub-package and what it may import besides itself."""
    rows = ["| sub-package | may import, besides itself |", "| --- | --- |"]
    for package, allowed in LAYERS.items():
        shown = ", ".join(p for p in LAYERS if p in allowed) or "no other labkit package"
        rows.append(f"| `labkit.{package}` | {shown} |")
    return "\n".join(rows)
