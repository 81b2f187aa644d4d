"""The order samples are read in: one module per order family (every_sample, block_shuffle, class_balanced,
grouped), the epoch wrapper (epoch_tagged), and the scores of an order (order_scores).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ResumableSampler": "resumable",
        "block_shuffle_order": "block_shuffle",
        "BlockShuffleSampler": "block_shuffle",
        "DistributedBlockSampler": "block_shuffle",
        "ClassBalancedSampler": "class_balanced",
        "GroupedBatchSampler": "grouped",
        "RandomOffsetSequentialSampler": "every_sample",
        "RandomPermutationSampler": "every_sample",
        "InOrderSampler": "every_sample",
        "EpochTagged": "epoch_tagged",
        "shuffle_buffer_order": "order_scores",
        "page_buffer_order": "order_scores",
        "batch_class_entropy": "order_scores",
        "mean_displacement": "order_scores",
        "pages_per_batch": "order_scores",
        "OrderScores": "order_scores",
        "score_order": "order_scores",
    },
)
