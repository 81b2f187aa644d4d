"""Where samples live on disk: image folders, the pack format, packing a folder or any iterable of samples into a
pack, and shards."""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FolderIndex": "image_folder",
        "scan_image_folder": "image_folder",
        "PackError": "pack_format",
        "NotAPackError": "pack_format",
        "UnsupportedVersionError": "pack_format",
        "TruncatedPackError": "pack_format",
        "CorruptIndexError": "pack_format",
        "EntryOutOfBoundsError": "pack_format",
        "ChecksumMismatchError": "pack_format",
        "PackLayout": "pack_format",
        "PackReader": "pack_format",
        "PackWriter": "pack_format",
        "VerifyReport": "pack_format",
        "verify_pack": "pack_format",
        "PackReport": "packing",
        "read_file": "packing",
        "pack_folder": "packing",
        "pack_samples": "sample_writer",
        "split_pack": "shards",
        "pack_records": "shards",
        "record_key": "shards",
        "record_key_and_worker": "shards",
        "feed_stream": "shards",
    },
)
