"""How the kit words counts and lists in what it prints: "1 worker", "2 workers" (one place, so no message says
"1 cores"), sizes in bytes as a person reads them, and a list cut short that says so ("a, b, c, … (8 in all)")."""

from __future__ import annotations

from collections.abc import Iterable


def count(n: float, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, singular for exactly 1, else ``plural`` (``noun + "s"`` unless given):
    ``count(1, "core") == "1 core"``, ``count(2, "batch", "batches") == "2 batches"``."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {noun if n == 1 else (plural or noun + 's')}"


def first(items: Iterable[object], limit: int) -> str:
    """The first ``limit`` of ``items`` joined by commas; a longer list ends in "…" and says how long it is, so a
    reader never takes the shown part for the whole."""
    shown = [str(item) for item in items]
    if len(shown) <= limit:
        return ", ".join(shown)
    return ", ".join(shown[:limit]) + f", … ({len(shown)} in all)"


def clipped(text: str, width: int) -> str:
    """``text`` if it fits in ``width`` characters, else its start and "…" in ``width``: a cut line says it is cut."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def size_text(nbytes: float) -> str:
    """Bytes the way a person reads them: ``512 B``, ``3.4 MiB``, ``1.20 GiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}" if unit == "GiB" else f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"
