"""On the device: host -> device transfer, normalisation and mixing, augmentation of a batch, and the decode of a
batch of encoded files."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "normalize_uint8": "transfer",
        "normalize_mix_uint8": "transfer",
        "to_device": "transfer",
        "DevicePrefetcher": "transfer",
        "normalize_affine": "transfer",
        "BatchRandomResizedCrop": "batch_augment",
        "DeviceDecoded": "device_decode",
    },
)
