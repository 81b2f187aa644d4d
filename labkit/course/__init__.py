"""What only the notebooks need: the panels, the deliberately broken pieces, the naive pieces a lab builds on,
ragged data, clips, time limits, figures, the torchrun and resume demos. The data folder, the photo-like data and
the ablation are the bench's (`labkit.bench`), which the command and the benchmarks share.

Import rule: labkit.course may use every layer, measure, diagnose and bench; no other labkit package imports it.

The order of the layers, and what each may import, is the package's own docstring (``labkit``).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "show_as_jpeg": "figures",
    "learner_folder": "learner_modules",
    "load_learner_module": "learner_modules",
    "TimeLimitExceeded": "time_limits",
    "time_limit": "time_limits",
})
