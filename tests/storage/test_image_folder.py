import os

import pytest

from labkit.storage.image_folder import scan_image_folder


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").close()


def test_classes_are_sorted_folders_and_files_sorted_within(tmp_path):
    for rel in ["b/2.jpg", "b/1.PNG", "a/x/3.jpeg", "a/0.jpg"]:
        _touch(str(tmp_path / rel))
    index = scan_image_folder(tmp_path)
    assert index.classes == ["a", "b"]
    assert list(index.relpaths) == ["a/0.jpg", "a/x/3.jpeg", "b/1.PNG", "b/2.jpg"]
    assert index.labels.tolist() == [0, 0, 1, 1]


def test_ignores_hidden_non_images_and_folders_named_like_images(tmp_path):
    for rel in ["a/ok.jpg", "a/notes.txt", "a/.hidden.jpg", "a/.ipynb_checkpoints/c.jpg", ".trash/t.jpg"]:
        _touch(str(tmp_path / rel))
    os.makedirs(tmp_path / "a" / "folder.jpg")
    index = scan_image_folder(tmp_path)
    assert index.classes == ["a"] and list(index.relpaths) == ["a/ok.jpg"]


def test_symlink_loop_does_not_hang(tmp_path):
    _touch(str(tmp_path / "a" / "ok.jpg"))
    os.symlink(tmp_path / "a", tmp_path / "a" / "loop")
    assert list(scan_image_folder(tmp_path).relpaths) == ["a/ok.jpg"]


def test_clear_errors_for_missing_or_empty_roots(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing: no such folder"):
        scan_image_folder(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no class folders"):
        scan_image_folder(tmp_path)
    os.makedirs(tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="no image files"):
        scan_image_folder(tmp_path)


def test_a_pack_given_as_a_folder_is_named_a_pack(encoded_pack):
    from labkit.core.errors import LabkitFileNotFoundError

    with pytest.raises(
        LabkitFileNotFoundError, match="is a labkit pack, not an ImageFolder: open it with PackedDataset"
    ):
        scan_image_folder(encoded_pack)
