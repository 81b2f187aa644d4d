"""The kit's wrappers (a logging dataset, a profiling or watched loader, an epoch-tagging sampler...) are the object
they wrap for every attribute they do not define themselves: ``loader.batch_size``, ``dataset.sample_path(i)``,
``sampler.state_dict()`` reach through. One rule for all of them, here.

Two guards keep the pass-through safe. Protocol names (``__getitems__``, ``__len__``, pickling's ``__getstate__``...)
never pass through: a wrapped dataset's ``__getitems__`` would skip the wrapper's own sample path. And before the
wrapped object is set — while a DataLoader worker unpickles the wrapper, or in ``__init__`` — a lookup raises
``AttributeError`` instead of recursing forever.
"""

from __future__ import annotations

from typing import Any, ClassVar


class PassThrough:
    """Base of a wrapper whose attribute `wraps` (a class attribute naming it) holds the wrapped object."""

    wraps: ClassVar[str] = "inner"

    def __getattr__(self, name: str) -> Any:  # only for names the wrapper itself does not have
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        try:
            inner = self.__dict__[type(self).wraps]
        except KeyError:  # not set yet: unpickling, or __init__ has not set it
            raise AttributeError(name) from None
        return getattr(inner, name)
