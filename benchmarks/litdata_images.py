"""LitData's chunks as (transformed image, label), for train_peers.litdata_loader.

A module of its own: a StreamingDataset subclass must be importable by name in spawned workers, and only
the LitData contender should pay for importing litdata.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import torch
from litdata import StreamingDataset
from PIL import Image


class LitDataImages(StreamingDataset):
    """The file's bytes decoded by PIL in the worker, then the training transform."""

    def __init__(self, chunks: str, transform: Callable) -> None:
        super().__init__(chunks, shuffle=True)
        self.train_transform = transform  # not .transform: StreamingDataset applies that one itself

    def __getitem__(self, index: Any) -> tuple[torch.Tensor, int]:
        sample = super().__getitem__(index)
        return self.train_transform(Image.open(io.BytesIO(sample["image"])).convert("RGB")), sample["label"]
