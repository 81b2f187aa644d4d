"""Measurements: loader timing, the step profile, this machine and its processes' memory, CPU cores, page faults
and the page cache.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "machine_info": "labkit.core.machine",
        "describe_machine": "labkit.core.machine",
        "Throughput": "loader_timing",
        "measure_loader": "loader_timing",
        "EpochTime": "loader_timing",
        "time_epochs": "loader_timing",
        "profile_loader": "step_profile",
        "CallCount": "python_calls",
        "count_python_calls": "python_calls",
        "CoreUsage": "cpu_usage",
        "CoreSampler": "cpu_usage",
        "rss_bytes": "process_memory",
        "pss_bytes": "process_memory",
        "read_memory": "process_memory",
        "MemoryReading": "process_memory",
        "tree_memory_bytes": "process_memory",
        "tree_memory_measure": "process_memory",
        "describe_tree_memory": "process_memory",
        "PeakMemory": "process_memory",
        "sweep_block_sizes": "block_size_sweep",
        "Tradeoff": "block_size_sweep",
        "plot_tradeoff": "block_size_sweep",
        "can_evict": "page_cache",
        "evict": "page_cache",
        "resident_fraction": "page_cache",
        "empty_page_cache": "page_cache",
        "resident_share": "page_cache",
        "mapping_processes": "page_cache",
        "Verdict": "verdict",
        "judge": "verdict",
        "time_decoders": "decoder_speed",
        "can_count_faults": "page_faults",
        "minor_faults": "page_faults",
        "tree_minor_faults": "page_faults",
        "fault_seconds": "page_faults",
    },
)
