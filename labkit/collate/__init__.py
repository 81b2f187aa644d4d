"""A list of samples -> one batch: stacking, padding, detection, graphs; MixUp and CutMix.

Import rule: labkit.collate may import labkit.core, labkit.decode, labkit.storage, labkit.datasets,
labkit.samplers, nothing else.

The layers run core -> decode -> storage -> datasets -> samplers -> collate -> workers -> device ->
distributed, and each imports only those to its left. measure reads every layer; diagnose reads every layer
and measure; course and tools may use everything; nothing imports course or tools.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "stack_uint8": "collate_fns",
    "stack_samples": "collate_fns",
    "list_collate": "collate_fns",
    "detection_collate": "collate_fns",
    "pad_collate": "collate_fns",
    "graph_collate": "collate_fns",
    "one_hot": "collate_fns",
    "draw_mix": "collate_fns",
    "mixed_targets": "collate_fns",
    "mix_batch": "collate_fns",
    "MixUp": "collate_fns",
    "MixCollate": "collate_fns",
    "MixUpCollate": "collate_fns",
    "CutMixCollate": "collate_fns",
})
