"""Map-style and iterable datasets over image folders, file lists, packs, shards, live streams and other engines' samples.

Import rule: labkit.datasets may import labkit.core, labkit.decode, labkit.storage, nothing else.

The order of the layers, and what each may import, is the package's own docstring (``labkit``).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "SampleError": "map_style",
    "SkipRecord": "map_style",
    "LabeledImageDataset": "map_style",
    "ImageFolderDataset": "map_style",
    "ImageFilesDataset": "map_style",
    "RecordDataset": "engines",
    "EpochScoped": "epoch_scoped",
    "decode_stream": "engines",
    "PackBackedDataset": "map_style",
    "PackedDataset": "map_style",
    "DecodedArrayDataset": "map_style",
    "EncodedPackDataset": "map_style",
    "FetchLoggedDataset": "fetch_log",
    "EpochPlan": "iterable",
    "ShardedIterableDataset": "iterable",
    "LiveStreamDataset": "iterable",
    "Stream": "iterable",
})
