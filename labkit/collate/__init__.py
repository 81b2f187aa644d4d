"""A list of samples -> one batch: stacking, padding, detection, graphs; MixUp and CutMix."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "stack_uint8": "batching",
        "stack_samples": "batching",
        "list_collate": "batching",
        "detection_collate": "batching",
        "pad_collate": "batching",
        "graph_collate": "batching",
        "one_hot": "mixing",
        "draw_mix": "mixing",
        "mixed_targets": "mixing",
        "mix_batch": "mixing",
        "MixUp": "mixing",
        "MixCollate": "mixing",
        "MixUpCollate": "mixing",
        "CutMixCollate": "mixing",
    },
)
