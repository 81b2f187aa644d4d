import os
import shutil
import time

from labkit.workspace import prepare

from conftest import SMALL


def test_prepare_packs_once_and_again_only_when_the_folder_changes(photos, tmp_path, capsys):
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
    import labkit.workspace as workspace
    from labkit.synthetic import PhotoSpec

    monkeypatch.setattr(workspace, "QUICK_COUNT", 6)
    monkeypatch.setattr(workspace, "PhotoSpec", lambda n: PhotoSpec(n=n, classes=2, width=64, height=48))
    ws = prepare(str(tmp_path / "new"), quick=True, size=16, progress=False)
    assert ws.count == 6 and "making 6 photo-like images" in capsys.readouterr().out


def test_data_root_is_the_clone_data_folder_or_the_environment_variable(tmp_path, monkeypatch):
    import labkit
    from labkit.workspace import DATA_ENV, data_root

    monkeypatch.delenv(DATA_ENV, raising=False)
    clone = os.path.dirname(os.path.dirname(os.path.abspath(labkit.__file__)))
    monkeypatch.chdir(tmp_path)  # the working directory does not matter
    assert data_root() == os.path.join(clone, "data")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "elsewhere"))
    assert data_root() == str(tmp_path / "elsewhere")


def test_course_workspace_keeps_quick_and_full_data_apart(tmp_path, monkeypatch, capsys):
    import labkit.workspace as workspace
    from labkit.synthetic import PhotoSpec

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
