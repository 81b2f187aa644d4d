"""How the kit words a count in what it prints: "1 worker", "2 workers" (one place, so no message says "1 cores")."""

from __future__ import annotations

from typing import Optional


def count(n: float, noun: str, plural: Optional[str] = None) -> str:
    """``n`` and ``noun``, singular for exactly 1, else ``plural`` (``noun + "s"`` unless given):
    ``count(1, "core") == "1 core"``, ``count(2, "batch", "batches") == "2 batches"``."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {noun if n == 1 else (plural or noun + 's')}"
