"""Each course script runs its offline path end to end, as a learner would call it."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(script, *args, env_extra=None):
    env = {**os.environ, "LABKIT_QUICK": "0", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "data_scripts", script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_make_photos_then_pack_folder(tmp_path):
    root, pack = str(tmp_path / "photos"), str(tmp_path / "photos-16.pack")
    made = _run("make_photos.py", "--out", root, "--n", "4", "--classes", "2", "--size", "48x32", "--no-progress")
    assert made.returncode == 0, made.stderr
    packed = _run("pack_folder.py", root, pack, "--decoded", "16", "--no-progress")
    assert packed.returncode == 0, packed.stderr
    assert "packed 4 decoded samples" in packed.stdout and "OK" in packed.stdout


def test_get_imagenette_offline_explains_how_to_use_local_data():
    out = _run("get_imagenette.py", "--offline")
    assert out.returncode == 0
    assert "ImageFolder" in out.stdout and "labkit pack" in out.stdout
