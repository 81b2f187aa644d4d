import json
import subprocess
import sys

import pytest

from labkit.course.synthetic_data import read_manifest
from labkit.tools.cli import main


def test_data_pack_verify(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LABKIT_QUICK", raising=False)
    root, pack = str(tmp_path / "p"), str(tmp_path / "p.pack")
    assert main(["data", "--out", root, "--n", "6", "--classes", "2", "--size", "64x48", "--no-progress"]) == 0
    assert read_manifest(root)["spec"]["n"] == 6
    assert main(["pack", root, pack, "--no-progress"]) == 0
    assert main(["verify", pack, "--no-progress"]) == 0
    assert "6 encoded samples" in capsys.readouterr().out


def test_quick_mode_makes_256(monkeypatch):
    monkeypatch.setenv("LABKIT_QUICK", "1")
    from labkit.tools import cli

    seen = {}
    monkeypatch.setattr("labkit.course.synthetic_data.make_photos", lambda out, spec, **kw: seen.setdefault("n", spec.n))
    cli.main(["data", "--out", "unused", "--n", "9999"])
    assert seen["n"] == 256


def test_verify_names_first_damaged_sample_and_exits_1(encoded_pack, tmp_path, capsys):
    from labkit.storage.pack_format import PackReader

    damaged = str(tmp_path / "damaged.pack")
    data = bytearray(open(encoded_pack, "rb").read())
    r = PackReader(encoded_pack)
    data[int(r.records["offset"][4]) + 100] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    assert main(["verify", damaged, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "sample 4" in err and r.paths[4] in err


def test_bad_input_exits_2_with_the_reason(tmp_path, capsys):
    assert main(["pack", str(tmp_path / "missing"), str(tmp_path / "x.pack"), "--no-progress"]) == 2
    assert "not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["data", "--size", "big"])


@pytest.mark.timeout(60)
def test_demo_makes_packs_verifies_and_runs_the_ablation(photos, tmp_path, capsys, monkeypatch):
    import shutil

    monkeypatch.setenv("LABKIT_DATA", str(tmp_path))  # the data is in the kit's folder: results go beside it
    data = str(tmp_path / "photos")
    shutil.copytree(photos, data)
    assert main(["demo", "--data", data, "--workers", "1", "--runs", "1", "--steps", "1", "--batch", "8",
                 "--only", "v1,v6", "--device", "cpu", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "[verify] OK" in text and "images/s" in text and "v6" in text
    result = json.load(open(f"{data}-ablation.json"))
    assert [v["id"] for v in result["versions"]] == ["v1", "v6"]
    assert open(f"{data}-ablation.png", "rb").read(4) == b"\x89PNG"


def test_console_script_and_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "labkit", "--help"], capture_output=True, text=True, check=True)
    assert "verify" in out.stdout and "demo" in out.stdout
