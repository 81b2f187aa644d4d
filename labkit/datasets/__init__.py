"""Map-style and iterable datasets over image folders, file lists, packs, shards, live streams and other engines' samples.

Import rule: labkit.datasets may import labkit.core, labkit.decode, labkit.storage, nothing else.

The layers run core -> decode -> storage -> datasets -> samplers -> collate -> workers -> device ->
distributed, and each imports only those to its left. measure reads every layer; diagnose reads every layer
and measure; bench uses all of those; course and tools may use everything; nothing imports course or tools.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "SampleError": "map_style",
    "SkipRecord": "map_style",
    "LabeledImageDataset": "map_style",
    "ImageFolderDataset": "map_style",
    "ImageFilesDataset": "map_style",
    "RecordDataset": "engines",
    "EpochSubset": "subset",
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
