"""On the device: host -> device transfer, normalisation and mixing.

Import rule: labkit.device may import labkit.core, labkit.decode, labkit.storage, labkit.datasets,
labkit.samplers, labkit.collate, labkit.workers, nothing else.

The order of the layers, and what each may import, is the package's own docstring (``labkit``).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "normalize_uint8": "transfer",
    "normalize_mix_uint8": "transfer",
    "to_device": "transfer",
    "DevicePrefetcher": "transfer",
    "normalize_affine": "transfer",
    "BatchRandomResizedCrop": "batch_augment",
})
