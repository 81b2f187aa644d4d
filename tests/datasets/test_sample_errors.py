import os
import pickle

import pytest
from conftest import OUT, corrupt_indices
from torch.utils.data import DataLoader

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.sample_errors import SampleError, check_on_error


def test_corrupt_sample_error_names_index_and_path(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT)
    corrupt, indices = corrupt_indices(ds, corrupt_photos)
    with pytest.raises(
        SampleError, match=rf"sample {indices[0]} \(.*{os.path.basename(ds.sample_path(indices[0]))}"
    ) as e:
        ds[indices[0]]
    assert e.value.index == indices[0] and e.value.path in corrupt


def test_error_surfaces_through_worker_with_its_type(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT)
    _, indices = corrupt_indices(ds, corrupt_photos)
    loader = DataLoader(ds, batch_size=1, sampler=[indices[0]], num_workers=1)
    with pytest.raises(SampleError, match=f"sample {indices[0]}"):
        next(iter(loader))


def test_an_unknown_on_error_is_refused_before_any_work():
    with pytest.raises(LabkitValueError, match=r"on_error must be one of \('raise', 'skip'\), got 'ignore'"):
        check_on_error("ignore")
    check_on_error("skip")


def test_a_sample_error_survives_the_trip_from_a_worker_with_its_message():
    error = pickle.loads(pickle.dumps(SampleError("sample 3 ('a.jpg'): truncated", 3, "a.jpg")))
    assert str(error) == "sample 3 ('a.jpg'): truncated" and isinstance(error, LabkitError)
