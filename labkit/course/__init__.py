"""What only the notebooks need: the panels, the deliberately broken pieces, ragged data, time limits, figures,
the torchrun and resume demos. The data folder, the photo-like data, the ablation, the clips and the naive
datasets are the bench's (`labkit.harness`), which the command and the benchmarks share with the course.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "show_as_jpeg": "figures",
        "learner_folder": "learner_modules",
        "load_learner_module": "learner_modules",
        "TimeLimitExceeded": "time_limits",
        "time_limit": "time_limits",
    },
)
