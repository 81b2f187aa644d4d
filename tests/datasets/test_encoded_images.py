import os

import pytest
import torch
from conftest import OUT

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.datasets.encoded_images import ImageFolderDataset


def test_a_list_of_files_with_names_or_indices_as_labels(photos):
    from labkit.datasets.encoded_images import ImageFilesDataset

    folder = ImageFolderDataset(photos, decoder="pil", size=OUT)
    files = [folder.sample_path(k) for k in range(len(folder))]
    names = [folder.classes[y] for y in folder.labels]
    by_name = ImageFilesDataset(files, names, decoder="pil", size=OUT)
    by_index = ImageFilesDataset(files, folder.labels.tolist(), classes=folder.classes, decoder="pil", size=OUT)
    for dataset in (by_name, by_index):
        assert dataset.classes == folder.classes and dataset.labels.tolist() == folder.labels.tolist()
        assert torch.equal(dataset[4][0], folder[4][0])
    relative = ImageFilesDataset([os.path.relpath(f, photos) for f in files], names, root=photos, size=OUT)
    assert relative.sample_path(0) == files[0] and len(relative) == len(files)
    assert ImageFilesDataset(files[:3], [0, 2, 2]).classes == ["0", "1", "2"]


def test_a_file_list_s_mistakes_are_named(photos):
    from labkit.datasets.encoded_images import ImageFilesDataset

    with pytest.raises(LabkitValueError, match="3 files but 2 labels"):
        ImageFilesDataset(["a", "b", "c"], [0, 1])
    with pytest.raises(LabkitTypeError, match="is one path: give a list of image files"):
        ImageFilesDataset(photos, [0])
    with pytest.raises(LabkitValueError, match="label 'cow' is not one of the classes"):
        ImageFilesDataset(["a", "b"], ["cat", "cow"], classes=["cat", "dog"])
    with pytest.raises(LabkitValueError, match="sample 1 has label 5, outside the 2 classes"):
        ImageFilesDataset(["a", "b"], [0, 5], classes=["cat", "dog"])
