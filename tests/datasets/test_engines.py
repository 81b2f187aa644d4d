"""labkit.datasets.engines: labkit's decoders, crops, samplers and batch engine on MosaicML Streaming (MDS),
LitData and WebDataset shards, each written by the engine's own writer and read through its own remote/local
layout (a folder standing for the bucket, another for the local cache), giving the pixels of a labkit pack."""

import io
import multiprocessing
import os
import tarfile

import pytest
import torch
from conftest import OUT

from labkit.core.errors import LabkitKeyError, LabkitTypeError
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.engines import RecordDataset, decode_stream
from labkit.decode.random_crop import RandomResizedCrop
from labkit.workers.loader_factory import make_loader


@pytest.fixture(scope="module")
def samples(photos):
    """(file bytes, label) of the shared photos, in the ImageFolder's order, with that dataset."""
    folder = ImageFolderDataset(photos, decoder="pil", size=OUT)
    return [(open(folder.sample_path(k), "rb").read(), int(folder.labels[k])) for k in range(len(folder))], folder


def _same_as_the_folder(dataset, folder):
    assert len(dataset) == len(folder) and dataset.classes == [str(k) for k in range(len(folder.classes))]
    batch = next(iter(make_loader(dataset, batch_size=8, shuffle=False, num_workers=0)))
    reference = next(iter(make_loader(folder, batch_size=8, shuffle=False, num_workers=0)))
    assert batch[0].dtype == torch.uint8 and torch.equal(batch[0], reference[0])  # one tensor, the batch engine's
    assert batch[1].tolist() == reference[1].tolist()


def test_mosaicml_streaming_mds_from_a_remote_through_its_local_cache(samples, tmp_path):
    streaming = pytest.importorskip("streaming")
    data, folder = samples
    remote, local = tmp_path / "bucket", tmp_path / "cache"
    with streaming.MDSWriter(out=str(remote), columns={"image": "bytes", "label": "int"}) as writer:
        for image, label in data:
            writer.write({"image": image, "label": label})
    records = streaming.StreamingDataset(remote=str(remote), local=str(local), shuffle=False, batch_size=8)
    dataset = RecordDataset(records, decoder="pil", size=OUT)
    _same_as_the_folder(dataset, folder)
    assert os.listdir(local)  # the shards were fetched into the local cache, as from a bucket


def test_an_mds_jpeg_column_is_refused_with_the_fix(samples, tmp_path):
    streaming = pytest.importorskip("streaming")
    from PIL import Image

    data, _ = samples
    with streaming.MDSWriter(out=str(tmp_path / "jpeg"), columns={"image": "jpeg", "label": "int"}) as writer:
        for image, label in data[:4]:
            writer.write({"image": Image.open(io.BytesIO(image)), "label": label})
    records = streaming.StreamingDataset(local=str(tmp_path / "jpeg"), shuffle=False, batch_size=2)
    with pytest.raises(LabkitTypeError, match="holds a .*Image.*MDS: a 'bytes' column, not 'jpeg'"):
        RecordDataset(records, classes=["a", "b", "c"])[0]


def _litdata_sample(sample):
    image, label = sample
    return {"image": image, "label": label}


def test_litdata_chunks_with_crops_in_the_decode_and_any_worker_count(samples, tmp_path):
    litdata = pytest.importorskip("litdata")
    data, folder = samples
    out = tmp_path / "chunks"
    litdata.optimize(
        fn=_litdata_sample,
        inputs=data,
        output_dir=str(out),
        chunk_bytes="1MB",
        num_workers=1,
        start_method=multiprocessing.get_start_method(),
        verbose=False,
    )
    crop = RandomResizedCrop(24, seed=3)
    dataset = RecordDataset(litdata.StreamingDataset(str(out)), classes=folder.classes, decoder="pil", crop=crop)
    by_folder = ImageFolderDataset(folder.root, decoder="pil", crop=crop)
    for k in (0, 7, len(data) - 1):
        assert torch.equal(dataset[k][0], by_folder[k][0]) and dataset[k][1] == by_folder[k][1]
    orders = []
    for workers in (0, 2):
        loader = make_loader(dataset, batch_size=6, num_workers=workers, seed=1)
        orders.append([(images.sum().item(), labels.tolist()) for images, labels in loader])
    assert orders[0] == orders[1]  # same order, same crops, whatever the workers


def _tar_shards(data, root, per_shard):
    root.mkdir()
    for s in range(0, len(data), per_shard):
        with tarfile.open(root / f"shard-{s // per_shard:05d}.tar", "w") as tar:
            for k, (image, label) in enumerate(data[s : s + per_shard]):
                for name, payload in ((f"{s + k:08d}.jpg", image), (f"{s + k:08d}.cls", str(label).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    return sorted(str(p) for p in root.iterdir())


def test_webdataset_shards_decoded_by_labkit_with_crops_seeded_by_each_key(samples, tmp_path):
    wds = pytest.importorskip("webdataset")
    data, folder = samples
    shards = _tar_shards(data, tmp_path / "shards", per_shard=10)
    decoded = list(decode_stream(wds.WebDataset(shards, shardshuffle=False), decoder="pil", size=OUT))
    assert [label for _, label in decoded] == [label for _, label in data]
    assert all(torch.equal(image, folder[k][0]) for k, (image, _) in enumerate(decoded))
    crop = RandomResizedCrop(16, seed=2)
    forward = [img for img, _ in decode_stream(wds.WebDataset(shards, shardshuffle=False), crop=crop, epoch=1)]
    backward = [img for img, _ in decode_stream(wds.WebDataset(shards[::-1], shardshuffle=False), crop=crop, epoch=1)]
    first_of_last_shard = 20
    assert torch.equal(forward[first_of_last_shard], backward[0])  # the key, not the position, draws the box


def test_a_record_without_the_field_and_a_stream_as_records_are_named():
    with pytest.raises(LabkitKeyError, match="has no field 'image' .*image_key= and label_key="):
        RecordDataset([{"img": b"", "label": 0}], classes=["a"])[0]
    with pytest.raises(LabkitTypeError, match="no length or no random access: a stream"):
        RecordDataset(iter([]))
