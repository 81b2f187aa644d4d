"""Diagnosis: the doctor, the bottleneck explainer, per-stage timing, soak runs, a small private /dev/shm, the
autotuner.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LoaderPlan": "doctor",
        "Finding": "doctor",
        "diagnose": "doctor",
        "format_findings": "doctor",
        "explain_bottleneck": "bottleneck",
        "advise": "bottleneck",
        "find_slow_samples": "bottleneck",
        "record_timeline": "bottleneck",
        "Timeline": "bottleneck",
        "BottleneckReport": "bottleneck",
        "time_stages": "stage_timing",
        "compare_decoders": "stage_timing",
        "StageReport": "stage_timing",
        "run_soak": "soak",
        "SoakReport": "soak",
        "trace_worker_memory": "soak",
        "WorkerMemoryTrace": "soak",
        "PrivateShmUnavailable": "small_shm",
        "private_shm": "small_shm",
        "autotune": "autotuner",
        "Budget": "autotuner",
        "LoaderConfig": "autotuner",
        "TuneResult": "autotuner",
    },
)
