import os

import pytest

from labkit.core.errors import LabkitError
from labkit.core.user_paths import OutputPathError, check_output_file, check_output_folder, require_folder


def test_an_input_folder_must_exist_and_be_a_folder(tmp_path):
    assert require_folder(tmp_path) == str(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"--data .*typo: no such folder \(looked for an ImageFolder"):
        require_folder(tmp_path / "typo", "--data")
    with pytest.raises(FileNotFoundError, match=r"deeper/typo: no such folder .* does not exist either"):
        require_folder(tmp_path / "missing" / "deeper" / "typo")
    (tmp_path / "f.jpg").write_bytes(b"")
    with pytest.raises(LabkitError, match="f.jpg is a file, not a folder"):
        require_folder(tmp_path / "f.jpg")
    assert sorted(os.listdir(tmp_path)) == ["f.jpg"]


def test_an_output_file_needs_an_existing_folder_that_takes_files(tmp_path):
    assert check_output_file(tmp_path / "a.json") == str(tmp_path / "a.json")
    with pytest.raises(OutputPathError, match=r"--json .*a.json: its folder .*missing/dir does not exist"):
        check_output_file(tmp_path / "missing" / "dir" / "a.json", "--json")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OutputPathError, match="its folder .*file is a file, not a folder"):
        check_output_file(tmp_path / "file" / "a.json")
    with pytest.raises(OutputPathError, match="is a folder: name a file"):
        check_output_file(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["file"]  # nothing made, the probe removed


def test_an_output_folder_may_be_new_but_its_parent_must_exist(tmp_path):
    assert check_output_folder(tmp_path / "new") == str(tmp_path / "new")
    assert not os.path.exists(tmp_path / "new")
    with pytest.raises(OutputPathError, match="--work .*: its parent folder .*missing does not exist"):
        check_output_folder(tmp_path / "missing" / "new", "--work")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OutputPathError, match="is a file: name a folder"):
        check_output_folder(tmp_path / "file")


def test_a_read_only_mount_is_refused_by_what_it_does_not_by_its_permission_bits(small_disk):
    import subprocess

    disk = small_disk(1 << 20)
    subprocess.run(["mount", "-o", "remount,ro", disk], check=True)
    with pytest.raises(OutputPathError, match=r"cannot write in .*\(Read-only file system\)"):
        check_output_file(os.path.join(disk, "a.json"), "--json")
    with pytest.raises(OutputPathError, match="Read-only"):
        check_output_folder(disk)
