"""The processes that load: make_loader, thread budgets, the watchdog, shared-memory slots, the staged pipeline."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "make_loader": "loader_factory",
        "StatefulLoader": "stateful_loader",
        "LoaderReport": "step_report",
        "ProfiledLoader": "profiled_loader",
        "data_bound_diagnosis": "step_report",
        "batch_length": "profiled_loader",
        "SlotLoader": "shared_slots",
        "ThreadLoader": "thread_loader",
        "BatchesAhead": "batches_ahead",
        "SlotPool": "shared_slots",
        "PipelineError": "staged_pipeline",
        "StagedPipeline": "staged_pipeline",
        "segment_exists": "staged_pipeline",
        "limit_worker_threads": "thread_budget",
        "main_thread_budget": "thread_budget",
        "torch_threads": "thread_budget",
        "threads_per_worker": "thread_budget",
        "LoaderHangError": "watchdog",
        "LoaderWorkerError": "watchdog",
        "WatchedLoader": "watchdog",
        "watched_loader": "watchdog",
    },
)
