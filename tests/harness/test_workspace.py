import os
import shutil
import time

import pytest
from conftest import SMALL

from labkit.harness.workspace import prepare


def test_prepare_packs_once_and_again_only_when_the_folder_changes(photos, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "kit"))
    folder = str(tmp_path / "photos")
    shutil.copytree(photos, folder)
    ws = prepare(folder, size=32, progress=False)
    assert ws.count == SMALL.n and os.path.exists(ws.pack) and os.path.exists(ws.decoded_pack)
    first = capsys.readouterr().out
    assert first.count("[pack] ") == 2 and first.count("[verify] OK") == 2
    prepare(folder, size=32, progress=False)
    assert capsys.readouterr().out.count("is up to date") == 2
    time.sleep(0.01)
    victim = os.path.join(folder, ws.classes[0], sorted(os.listdir(os.path.join(folder, ws.classes[0])))[0])
    os.unlink(victim)
    ws = prepare(folder, size=32, progress=False)
    assert ws.count == SMALL.n - 1 and "up to date" not in capsys.readouterr().out


def test_prepare_makes_the_data_set_when_missing(tmp_path, monkeypatch, capsys):
    import labkit.harness.workspace as workspace

    monkeypatch.setenv(workspace.DATA_ENV, str(tmp_path / "kit"))
    from labkit.harness.synthetic_data import PhotoSpec

    monkeypatch.setattr(workspace, "QUICK_COUNT", 6)
    monkeypatch.setattr(workspace, "PhotoSpec", lambda n: PhotoSpec(n=n, classes=2, width=64, height=48))
    ws = prepare(None, quick=True, size=16, progress=False)  # the kit's own set, made on first use
    assert ws.count == 6 and "making 6 photo-like images" in capsys.readouterr().out
    assert ws.folder == str(tmp_path / "kit" / "photos-quick")
    ws = prepare(str(tmp_path / "kit" / "new"), quick=True, size=16, progress=False, make=True)
    assert ws.count == 6


def test_a_named_folder_that_is_missing_is_an_error_and_nothing_is_made(tmp_path, monkeypatch):
    import labkit.harness.workspace as workspace

    monkeypatch.setenv(workspace.DATA_ENV, str(tmp_path / "kit"))
    for named in (tmp_path / "typo", tmp_path / "kit" / "typo"):
        with pytest.raises(FileNotFoundError, match="typo: no such folder .*ImageFolder"):
            prepare(str(named), progress=False)
    (tmp_path / "a-file").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="a-file is a file, not a folder"):
        prepare(str(tmp_path / "a-file"), progress=False)
    with pytest.raises(ValueError, match="made only inside the kit's data folder"):
        prepare(str(tmp_path / "outside"), progress=False, make=True)
    assert sorted(os.listdir(tmp_path)) == ["a-file"]  # not even the kit's data folder was made


def test_data_root_is_the_clone_data_folder_or_the_environment_variable(tmp_path, monkeypatch):
    import labkit
    from labkit.core.environment import DATA_ENV
    from labkit.harness.workspace import data_root

    monkeypatch.delenv(DATA_ENV, raising=False)
    clone = os.path.dirname(os.path.dirname(os.path.abspath(labkit.__file__)))
    monkeypatch.chdir(tmp_path)  # the working directory does not matter
    assert data_root() == os.path.join(clone, "data")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "elsewhere"))
    assert data_root() == str(tmp_path / "elsewhere")


def test_course_workspace_keeps_quick_and_full_data_apart(tmp_path, monkeypatch, capsys):
    import labkit.harness.workspace as workspace
    from labkit.harness.synthetic_data import PhotoSpec

    monkeypatch.setenv(workspace.DATA_ENV, str(tmp_path))
    monkeypatch.setattr(workspace, "QUICK_COUNT", 4)
    monkeypatch.setattr(workspace, "PhotoSpec", lambda n=5: PhotoSpec(n=n, classes=2, width=64, height=48))
    monkeypatch.delenv("LABKIT_QUICK", raising=False)
    quick = workspace.course_workspace(progress=False)  # quick when the variable is unset
    out = capsys.readouterr().out
    assert str(tmp_path) not in out and out.count("[verify] OK") == 2  # no machine paths; new packs verified
    assert quick.count == 4 and quick.folder == str(tmp_path / "photos-quick")
    assert os.path.isfile(quick.pack) and os.path.isfile(quick.decoded_pack)
    workspace.course_workspace(progress=False)
    assert "[verify]" not in capsys.readouterr().out  # up to date: the datasets check checksums as they read
    monkeypatch.setenv("LABKIT_QUICK", "0")
    full = workspace.course_workspace(progress=False)
    assert full.count == 5 and full.folder == str(tmp_path / "photos")


def _tree(root):
    """Every file under ``root`` with its size, mtime and bytes: what "left untouched" means."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = open(path, "rb").read() if os.path.isfile(path) else b""
            found[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns, data)
    return found


def _read_only_runner(source, mount):
    """A command prefix under which ``mount`` shows ``source`` read-only: a read-only bind mount in a mount
    namespace of its own as root (gone when the command ends), else the folder's write bits removed."""
    import shutil as sh
    import subprocess

    if os.geteuid() != 0:
        for dirpath, dirs, files in os.walk(source):
            for name in dirs + files:
                os.chmod(os.path.join(dirpath, name), 0o555 if name in dirs else 0o444)
        os.chmod(source, 0o555)
        os.rmdir(mount)
        os.symlink(source, mount)
        return lambda command: command
    if not sh.which("unshare") or subprocess.call(["unshare", "-m", "true"], stderr=subprocess.DEVNULL) != 0:
        pytest.skip("as root, a read-only folder needs a read-only bind mount, and `unshare -m` is refused here")
    return lambda command: [
        "unshare",
        "-m",
        "sh",
        "-c",
        f'mount --bind "{source}" "{mount}" && mount -o remount,ro,bind "{mount}" && exec "$@"',
        "sh",
        *command,
    ]


@pytest.mark.timeout(240)
def test_the_ablation_runs_on_a_read_only_folder_and_leaves_it_untouched(photos, tmp_path):
    import subprocess
    import sys

    source, mount, kit_data = tmp_path / "source", tmp_path / "datasets", tmp_path / "kit-data"
    shutil.copytree(photos, source / "photos")
    mount.mkdir()
    runner = _read_only_runner(str(source), str(mount))
    before = _tree(str(source))
    env = dict(os.environ, LABKIT_DATA=str(kit_data), LABKIT_QUICK="1")
    base = [
        sys.executable,
        "-m",
        "labkit",
        "demo",
        "--data",
        str(mount / "photos"),
        "--only",
        "v1,v3",
        "--runs",
        "1",
        "--steps",
        "1",
        "--batch",
        "4",
        "--workers",
        "1",
        "--no-progress",
    ]
    done = subprocess.run(runner(base), env=env, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _tree(str(source)) == before  # nothing written into or beside the user's folder
    assert "the kit does not write beside your data" in done.stdout
    derived = [p for p in (kit_data / "derived").iterdir()]
    assert len(derived) == 1 and derived[0].name.startswith("photos-")
    assert sorted(p.name for p in derived[0].iterdir() if p.suffix in (".pack", ".json", ".png")) == [
        "photos-256.pack",
        "photos-ablation.json",
        "photos-ablation.png",
        "photos.pack",
    ]

    # a --work folder that cannot be written either: one line naming it and the option that moves it
    blocked = runner(base + ["--work", str(mount / "photos" / "packs")])
    done = subprocess.run(blocked, env=env, capture_output=True, text=True, timeout=200)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert str(mount / "photos" / "packs") in line and "--work" in line, line
    assert _tree(str(source)) == before


def test_derived_files_of_an_outside_folder_go_to_the_kit_data_folder_under_a_name_of_its_path(tmp_path, monkeypatch):
    from labkit.core.environment import DATA_ENV
    from labkit.harness.workspace import derived_folder

    monkeypatch.setenv(DATA_ENV, str(tmp_path / "kit"))
    a, b = derived_folder(str(tmp_path / "x" / "photos")), derived_folder(str(tmp_path / "y" / "photos"))
    assert a != b and os.path.dirname(a) == str(tmp_path / "kit" / "derived")
    assert derived_folder(str(tmp_path / "x" / "photos")) == a  # the same folder, the same place
    assert derived_folder(str(tmp_path / "kit" / "photos")) == str(tmp_path / "kit")  # the kit's own: beside
    assert derived_folder(str(tmp_path / "x" / "photos"), work="elsewhere") == "elsewhere"


def test_paths_are_shown_relative_to_the_working_directory(tmp_path, monkeypatch):
    from labkit.harness.workspace import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path(str(tmp_path / "data" / "photos")) == os.path.join("data", "photos")
    assert shown_path(str(tmp_path.parent)) == ".."


def test_messages_name_files_under_the_data_folder_relative_to_it_and_hide_other_folders(tmp_path, monkeypatch):
    from labkit.harness.workspace import shown_text

    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "data"))
    message = (
        f"{tmp_path / 'data' / 'photos.pack'}: record 100 is damaged; "
        "see /home/someone/project/logs/run.txt or ./notes/x.txt"
    )
    assert shown_text(message) == "photos.pack: record 100 is damaged; see run.txt or ./notes/x.txt"


def test_messages_keep_what_only_looks_like_a_path(tmp_path, monkeypatch):
    from labkit.harness.workspace import shown_text

    monkeypatch.setenv("LABKIT_DATA", "/data")
    kept = (
        "see https://pytorch.org/docs/stable/data.html, file:///home/u/x, ~/.cache/labkit/p.pack, "
        "C:/Users/x/y.txt, 120 images/s, a 1/2/3 split and /mnt/data/x"
    )
    assert shown_text(kept) == kept.replace("/mnt/data/x", "x")


def test_messages_name_files_in_a_scratch_folder_relative_to_it(tmp_path, monkeypatch):
    from labkit.harness.workspace import shown_text

    monkeypatch.setenv("LABKIT_DATA", str(tmp_path))
    scratch = tmp_path / "lab05-x1y2"
    assert shown_text(f"{scratch / 'photos.pack'}: sample 100", inside=[str(scratch)]) == "photos.pack: sample 100"
    assert shown_text(f"'{scratch / 'a.pack'}'") == "'lab05-x1y2/a.pack'"
