"""One ``worker_init_fn`` made of several: the kit's own steps first, then the caller's, in order.

Every part of the kit that must run something in each DataLoader worker (one thread per worker,
a stack-dump handler, a note of the worker's pid) also has to run the ``worker_init_fn`` the caller
passed. `WorkerInitChain` does that once, and pickles (spawn and forkserver send it to each worker),
where a closure would not.
"""

from __future__ import annotations

from collections.abc import Callable

WorkerInit = Callable[[int], None]


class WorkerInitChain:
    """Calls each of ``steps`` that is not None with the worker's id, in order."""

    def __init__(self, *steps: WorkerInit | None) -> None:
        self.steps = [s for s in steps if s is not None]

    def __call__(self, worker_id: int) -> None:
        for step in self.steps:
            step(worker_id)

    def __repr__(self) -> str:
        return f"WorkerInitChain({', '.join(getattr(s, '__name__', type(s).__name__) for s in self.steps)})"
