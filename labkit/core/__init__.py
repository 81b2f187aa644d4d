"""The error every kit error derives from, switches and environment (the LABKIT_* flags, usable CPUs), string
tables that DataLoader workers can share without copy-on-write, the log every process of a loader can append
to, host tensors and buffers reused between batches, this machine (what it is, its OS, RAM and /dev/shm), and the
one clock every measurement reads (`timing`).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "flag": "environment",
        "quick_mode": "environment",
        "profile_enabled": "environment",
        "usable_cpu_ids": "environment",
        "usable_cpus": "environment",
        "clone_root": "environment",
        "rank_and_world": "environment",
        "consumer_slot": "environment",
        "QUICK_ENV": "environment",
        "PROFILE_ENV": "environment",
        "DATA_ENV": "environment",
        "EpochIndex": "epoch_index",
        "EpochBatch": "epoch_index",
        "epoch_scope": "epoch_index",
        "epoch_of": "epoch_index",
        "CpuBudget": "cpus",
        "cpu_budget": "cpus",
        "ranks_on_node": "cpus",
        "LabkitError": "errors",
        "storage_refs": "host_buffers",
        "HostBuffers": "host_buffers",
        "batch_buffer": "host_buffers",
        "os_name": "machine",
        "running": "processes",
        "process_maps": "processes",
        "MemoryFacts": "machine",
        "memory_facts": "machine",
        "machine_info": "machine",
        "describe_machine": "machine",
        "SharedLog": "shared_log",
        "StringTable": "string_table",
        "printable": "string_table",
        "Stopwatch": "timing",
        "Deadline": "timing",
        "Passes": "timing",
        "time_calls": "timing",
        "timed": "timing",
        "timestamp": "timing",
    },
)
