"""The labkit command line and the pack fuzzer."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "main": "cli",
    },
)
