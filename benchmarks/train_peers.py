"""The strongest peers' own training pipelines (random-resized crop 224 + flip, uint8 out), for train_pipeline.py.

Each is used the way its documentation shows, on the same photos and with as many workers as labkit gets:
* FFCV: a ``.beton`` written by its ``DatasetWriter`` (``RGBImageField(write_mode="jpg")``: FFCV re-encodes
  every image with OpenCV, quality 90), read by its ``Loader`` with ``RandomResizedCropRGBImageDecoder``, which
  crops inside the JPEG decode (libjpeg-turbo's lossless crop, then a scaled decode); its workers are threads.
  It builds from source: it needs the system's libjpeg-turbo and OpenCV headers (Debian: ``libturbojpeg0-dev
  libopencv-dev pkg-config``), then ``pip install ffcv``.
* NVIDIA DALI's CPU pipeline (``device_id=None``): ``readers.file`` + ``decoders.image_random_crop``, which
  decodes only the crop's region, then ``resize`` and ``flip``; threads in one process.
  ``pip install nvidia-dali-cuda120`` (the wheel carries its libraries).
* SPDL (Meta's thread-based pipeline): a ``PipelineBuilder`` whose source is the shuffled (path, label) list; each
  file demuxed and decoded by FFmpeg in a pool of threads (``concurrency=workers``), its random-resized crop, resize
  and flip done by FFmpeg's filter graph inside the decode (torchvision's ``RandomResizedCrop.get_params`` draws the
  box), then ``aggregate`` to batches and ``convert_frames`` into one array. ``pip install spdl`` and FFmpeg's shared
  libraries (Debian and Ubuntu: the ``ffmpeg`` package pulls them in).
* LitData: chunks written by ``litdata.optimize`` (the files' bytes as they are), read by
  ``StreamingDataset`` + ``StreamingDataLoader`` with the torchvision training transform in its workers.
Each writer works where the kit keeps what it derives from a folder: never beside the user's photos.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import torch
from peers import samples


class _FolderImages:
    """(PIL image, label) pairs, the indexed dataset FFCV's writer reads."""

    def __init__(self, folder: str) -> None:
        self.samples = samples(folder)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        from PIL import Image

        path, label = self.samples[i]
        return Image.open(path).convert("RGB"), label


def write_beton(folder: str, out: str, workers: int) -> str:
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    if os.path.exists(out):
        os.remove(out)
    writer = DatasetWriter(
        out, {"image": RGBImageField(write_mode="jpg", jpeg_quality=90), "label": IntField()}, num_workers=workers
    )
    writer.from_indexed_dataset(_FolderImages(folder))
    return out


def ffcv_loader(beton: str, batch: int, workers: int, size: int) -> Any:
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage

    return Loader(
        beton,
        batch_size=batch,
        num_workers=workers,
        order=OrderOption.RANDOM,
        os_cache=True,
        drop_last=True,
        pipelines={
            "image": [
                RandomResizedCropRGBImageDecoder((size, size)),
                RandomHorizontalFlip(),
                ToTensor(),
                ToTorchImage(),
            ],
            "label": [IntDecoder(), ToTensor(), Squeeze()],
        },
    )


def dali_loader(folder: str, batch: int, workers: int, size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """DALI's CPU-only training pipeline as (uint8 N×3×H×W, labels) batches: one epoch, then it stops."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    @pipeline_def(batch_size=batch, num_threads=workers, device_id=None, prefetch_queue_depth=2)
    def train() -> Any:
        jpegs, labels = fn.readers.file(file_root=folder, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3]
        )
        images = fn.resize(images, resize_x=size, resize_y=size, antialias=True)
        images = fn.flip(images, horizontal=fn.random.coin_flip())
        return fn.transpose(images, perm=[2, 0, 1]), labels

    pipeline = train()
    pipeline.build()
    for batch_dict in DALIGenericIterator(
        pipeline, ["image", "label"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP
    ):
        yield batch_dict[0]["image"], batch_dict[0]["label"].squeeze(-1)


def spdl_loader(folder: str, batch: int, workers: int, size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """SPDL's thread pipeline as (uint8 N×3×H×W, labels) batches: one epoch, then it stops."""
    import random

    import spdl.io
    from spdl.pipeline import PipelineBuilder
    from torchvision.transforms import RandomResizedCrop

    items = samples(folder)
    random.shuffle(items)

    def load(item: tuple[str, int]) -> tuple[Any, int]:
        path, label = item
        packets = spdl.io.demux_image(path)
        shape = torch.empty(()).expand(3, packets.height, packets.width)  # the size get_params reads, no pixels
        top, left, height, width = RandomResizedCrop.get_params(shape, [0.08, 1.0], [3 / 4, 4 / 3])
        flip = ",hflip" if random.random() < 0.5 else ""
        graph = f"crop={width}:{height}:{left}:{top},scale={size}:{size}:flags=bilinear{flip},format=pix_fmts=rgb24"
        return spdl.io.decode_packets(packets, filter_desc=graph), label

    def collate(loaded: list[tuple[Any, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        images = spdl.io.to_torch(spdl.io.convert_frames([frames for frames, _ in loaded]))
        return images.permute(0, 3, 1, 2), torch.tensor([label for _, label in loaded])

    pipeline = (
        PipelineBuilder()
        .add_source(items)
        .pipe(load, concurrency=workers, output_order="completion")
        .aggregate(batch, drop_last=True)
        .pipe(collate)
        .add_sink(2)
        .build(num_threads=workers)
    )
    with pipeline.auto_stop():
        yield from pipeline.get_iterator(timeout=600)


def _file_bytes(sample: tuple[str, int]) -> dict:
    path, label = sample
    with open(path, "rb") as f:
        return {"image": f.read(), "label": label}


def write_litdata(folder: str, out: str, workers: int) -> str:
    import litdata

    if os.path.isdir(out):
        shutil.rmtree(out)
    # optimize() would switch the whole process to spawn; the other contenders keep this one's start method
    litdata.optimize(
        fn=_file_bytes,
        inputs=samples(folder),
        output_dir=out,
        chunk_bytes="64MB",
        num_workers=workers,
        start_method=multiprocessing.get_start_method(),
        verbose=False,
    )
    return out


def litdata_loader(chunks: str, batch: int, workers: int, transform: Callable) -> Any:
    import litdata
    from litdata_images import LitDataImages  # its own module: importable by spawned workers, litdata only here

    return litdata.StreamingDataLoader(LitDataImages(chunks, transform), batch_size=batch, num_workers=workers)
