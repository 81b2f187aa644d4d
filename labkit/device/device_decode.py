"""The decode on the accelerator, after the loader: the batch engine's workers hand over a pack's encoded files
(`labkit.datasets.pack_datasets.EncodedPackDataset`, collated by `labkit.collate.batching.list_collate`), and a
device decoder of the registry (``nvjpeg``: `labkit.decode.registry.device_decoder`) decodes each whole batch where
the model is, so the CPU decodes nothing. What the ablation's v8 runs, and what a training script writes::

    loader = make_loader(EncodedPackDataset("photos.pack"), batch_size=64, collate_fn=list_collate)
    for images, labels in DeviceDecoded(loader, size=224, device="cuda"):
        ...  # images: uint8 N×3×224×224 on the GPU

A batch with a file the device cannot decode raises `labkit.decode.decoder_contract.DecodeError` naming its position
in the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.pass_through import PassThrough
from labkit.decode.decoder_contract import OUTPUT_SIZE, Size
from labkit.decode.registry import device_decoder


class DeviceDecoded(PassThrough):
    """``loader``'s batches of encoded files, each decoded whole on ``device`` by the device decoder ``decoder``:
    (uint8 N×3×H×W images at ``size``, labels), both on ``device``. The loader's own attributes stay reachable."""

    wraps = "loader"

    def __init__(
        self, loader: Iterable, size: Size = OUTPUT_SIZE, device: str | torch.device = "cuda", decoder: str = "nvjpeg"
    ) -> None:
        info = device_decoder(decoder)  # a clear error where this machine has no such device
        self.device = torch.device(device)
        if self.device.type != info.device_type:
            raise LabkitValueError(
                f"the {decoder} decoder decodes on a {info.device_type.upper()} device, not on "
                f"{self.device}: pass device='{info.device_type}' (or decode in the workers with "
                "a CPU decoder)"
            )
        self.loader, self.size, self._decode_batch = loader, size, info.decode_batch

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, Any]]:
        for blobs, labels in self.loader:
            images = self._decode_batch(blobs, self.size, device=self.device)
            yield images, labels.to(self.device, non_blocking=True) if torch.is_tensor(labels) else labels
