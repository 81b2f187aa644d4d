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
