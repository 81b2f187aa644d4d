"""Ranks under torchrun, launching it, staging to node-local disk, checkpoints."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DistInfo": "ranks",
        "init_from_env": "ranks",
        "close_process_group": "ranks",
        "stage_to_local": "ranks",
        "file_crc32": "ranks",
        "torchrun_command": "launch",
        "torchrun_env": "launch",
        "CheckpointError": "checkpoint",
        "save_checkpoint": "checkpoint",
        "load_checkpoint": "checkpoint",
    },
)
