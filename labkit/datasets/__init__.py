"""Map-style and iterable datasets over image folders, file lists, packs, shards, live streams and other engines'
samples, and the batch engine every image dataset fetches through."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SampleError": "sample_errors",
        "SkipRecord": "sample_errors",
        "LabeledImageDataset": "labeled_images",
        "ImageFolderDataset": "encoded_images",
        "ImageFilesDataset": "encoded_images",
        "RecordDataset": "engines",
        "EpochScoped": "epoch_scoped",
        "decode_stream": "engines",
        "PackBackedDataset": "pack_datasets",
        "PackedDataset": "pack_datasets",
        "DecodedArrayDataset": "pack_datasets",
        "EncodedPackDataset": "pack_datasets",
        "FetchLoggedDataset": "fetch_log",
        "BatchEngine": "batch_engine",
        "EpochPlan": "iterable",
        "ShardedIterableDataset": "iterable",
        "LiveStreamDataset": "iterable",
        "Stream": "iterable",
    },
)
