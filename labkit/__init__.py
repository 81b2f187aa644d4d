"""labkit: measured, reusable PyTorch data-loading pieces, laid out in the order the data flows.

Each sub-package is a layer (``core``, ``decode``, ``storage``, ``datasets``, ``samplers``, ``collate``, ``workers``,
``device``, ``distributed``), or reads them (``measure``, ``diagnose``), or stands on them (``harness``, ``course``,
``tools``). What each may import is written once, in `LAYERS` (`labkit.core.layers`); no module uses another's
private names.

The names an engineer uses in a training script are here, e.g.::

    from labkit import PackedDataset, BlockShuffleSampler, make_loader, DevicePrefetcher

Every package face is lazy (PEP 562): ``import labkit`` imports neither torch nor any module until a
name is used, so parts that must run before torch (`labkit.diagnose.small_shm.private_shm`) can.
Every error the kit raises derives from `LabkitError`.
"""

from labkit.core.lazy import lazy_exports

__version__ = "0.2.0"

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LabkitError": "labkit.core.errors",
        "LAYERS": "labkit.core.layers",
        # decode
        "decode_image": "labkit.decode.registry",
        "get_decoder": "labkit.decode.registry",
        "DECODERS": "labkit.decode.registry",
        "DecodeError": "labkit.decode.decoder_contract",
        "RandomResizedCrop": "labkit.decode.random_crop",
        "CenterCrop": "labkit.decode.center_crop",
        # storage
        "PackReader": "labkit.storage.pack_format",
        "PackWriter": "labkit.storage.pack_format",
        "PackError": "labkit.storage.pack_format",
        "verify_pack": "labkit.storage.pack_format",
        "pack_folder": "labkit.storage.packing",
        "pack_samples": "labkit.storage.sample_writer",
        "scan_image_folder": "labkit.storage.image_folder",
        # datasets
        "ImageFolderDataset": "labkit.datasets.encoded_images",
        "ImageFilesDataset": "labkit.datasets.encoded_images",
        "RecordDataset": "labkit.datasets.engines",
        "decode_stream": "labkit.datasets.engines",
        "PackedDataset": "labkit.datasets.pack_datasets",
        "DecodedArrayDataset": "labkit.datasets.pack_datasets",
        "ShardedIterableDataset": "labkit.datasets.iterable",
        "LiveStreamDataset": "labkit.datasets.iterable",
        # samplers
        "BlockShuffleSampler": "labkit.samplers.block_shuffle",
        "DistributedBlockSampler": "labkit.samplers.block_shuffle",
        "ClassBalancedSampler": "labkit.samplers.class_balanced",
        "GroupedBatchSampler": "labkit.samplers.grouped",
        "RandomOffsetSequentialSampler": "labkit.samplers.every_sample",
        "RandomPermutationSampler": "labkit.samplers.every_sample",
        "EpochTagged": "labkit.samplers.epoch_tagged",
        # collate
        "stack_uint8": "labkit.collate.batching",
        "pad_collate": "labkit.collate.batching",
        "detection_collate": "labkit.collate.batching",
        "graph_collate": "labkit.collate.batching",
        "MixUpCollate": "labkit.collate.mixing",
        "CutMixCollate": "labkit.collate.mixing",
        # workers
        "make_loader": "labkit.workers.loader_factory",
        "StatefulLoader": "labkit.workers.stateful_loader",
        "limit_worker_threads": "labkit.workers.thread_budget",
        "SlotLoader": "labkit.workers.shared_slots",
        "ThreadLoader": "labkit.workers.thread_loader",
        "StagedPipeline": "labkit.workers.staged_pipeline",
        "LoaderHangError": "labkit.workers.watchdog",
        "LoaderWorkerError": "labkit.workers.watchdog",
        # device
        "DevicePrefetcher": "labkit.device.transfer",
        "BatchRandomResizedCrop": "labkit.device.batch_augment",
        "normalize_uint8": "labkit.device.transfer",
        # distributed
        "init_from_env": "labkit.distributed.ranks",
        "stage_to_local": "labkit.distributed.ranks",
        "save_checkpoint": "labkit.distributed.checkpoint",
        "load_checkpoint": "labkit.distributed.checkpoint",
        # measure, diagnose
        "measure_loader": "labkit.measure.loader_timing",
        "judge": "labkit.measure.verdict",
        "profile_loader": "labkit.measure.step_profile",
        "explain_bottleneck": "labkit.diagnose.bottleneck",
    },
)
