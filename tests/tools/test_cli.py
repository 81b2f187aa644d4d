import json
import subprocess
import sys

import pytest

from labkit.harness.synthetic_data import read_manifest
from labkit.tools.cli import main


def test_data_pack_verify(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LABKIT_QUICK", raising=False)
    root, pack = str(tmp_path / "p"), str(tmp_path / "p.pack")
    assert main(["data", "--out", root, "--n", "6", "--classes", "2", "--size", "64x48", "--no-progress"]) == 0
    assert read_manifest(root)["spec"]["n"] == 6
    assert main(["pack", root, pack, "--no-progress"]) == 0
    assert main(["verify", pack, "--no-progress"]) == 0
    assert "6 encoded samples" in capsys.readouterr().out


def test_data_makes_a_validation_set_of_the_same_classes_beside_it(tmp_path, capsys):
    from labkit.datasets.encoded_images import ImageFolderDataset

    root = str(tmp_path / "photos")
    assert (
        main(["data", "--out", root, "--n", "8", "--val", "4", "--classes", "4", "--size", "64x48", "--no-progress"])
        == 0
    )
    train, val = ImageFolderDataset(root, size=16), ImageFolderDataset(root + "-val", size=16)
    assert len(val) == 4 and val.classes == train.classes
    shared = [p for p in val.relpaths if p in set(train.relpaths)]
    assert shared and all(open(f"{root}/{p}", "rb").read() != open(f"{root}-val/{p}", "rb").read() for p in shared)
    assert main(["data", "--out", str(tmp_path / "few"), "--n", "8", "--val", "2", "--classes", "4"]) == 2
    assert "--val 2 with 4 classes" in capsys.readouterr().err


def test_quick_mode_makes_256(monkeypatch):
    monkeypatch.setenv("LABKIT_QUICK", "1")
    from labkit.tools import cli

    seen = {}
    monkeypatch.setattr(
        "labkit.harness.synthetic_data.make_photos", lambda out, spec, **kw: seen.setdefault("n", spec.n)
    )
    cli.main(["data", "--out", "unused"])
    assert seen.pop("n") == 256
    cli.main(["data", "--out", "unused", "--n", "40"])  # a number given wins over the mode
    assert seen["n"] == 40


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
    assert "missing: no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["data", "--size", "big"])


@pytest.mark.timeout(60)
def test_demo_makes_packs_verifies_and_runs_the_ablation(photos, tmp_path, capsys, monkeypatch):
    import shutil

    monkeypatch.setenv("LABKIT_DATA", str(tmp_path))  # the data is in the kit's folder: results go beside it
    data = str(tmp_path / "photos")
    shutil.copytree(photos, data)
    assert (
        main(
            [
                "demo",
                "--data",
                data,
                "--workers",
                "1",
                "--runs",
                "1",
                "--steps",
                "1",
                "--batch",
                "8",
                "--only",
                "v1,v6",
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "[verify] OK" in text and "images/s" in text and "v6" in text
    result = json.load(open(f"{data}-ablation.json"))
    assert [v["id"] for v in result["versions"]] == ["v1", "v6"]
    assert open(f"{data}-ablation.png", "rb").read(4) == b"\x89PNG"


def test_console_script_and_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "labkit", "--help"], capture_output=True, text=True, check=True)
    assert "verify" in out.stdout and "demo" in out.stdout


# -- the mistakes people make: typos, outputs that cannot be written, full disks, kills and Ctrl-C -------------

import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

from conftest import files_under  # noqa: E402

from labkit.storage.pack_format import verify_pack  # noqa: E402


@pytest.mark.parametrize("command", ["ablation", "demo", "autotune"])
def test_a_data_folder_that_is_missing_or_a_file_stops_at_once_and_nothing_is_made(
    command, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "kit"))
    (tmp_path / "photo.jpg").write_bytes(b"")
    for data, said in (
        (tmp_path / "typo", "typo: no such folder (looked for an ImageFolder"),
        (tmp_path / "photo.jpg", "photo.jpg is a file, not a folder"),
    ):
        assert main([command, "--data", str(data), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"labkit {command}: --data ") and said in err
    assert os.listdir(tmp_path) == ["photo.jpg"]  # no made-up photos, no packs, not even the kit's data folder


def test_an_output_that_cannot_be_written_stops_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "kit"))
    for argv, said in (
        (["ablation", "--json", str(tmp_path / "missing" / "a.json")], "--json "),
        (["ablation", "--plot", str(tmp_path / "missing" / "a.png")], "--plot "),
        (["autotune", "--work", str(tmp_path / "missing" / "w")], "--work "),
        (["data", "--out", str(tmp_path / "missing" / "deeper")], "--out "),
        (["pack", str(tmp_path), str(tmp_path / "missing" / "x.pack")], "the pack "),
    ):
        t0 = time.perf_counter()
        assert main(argv + ["--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and "does not exist" in err, err
        assert time.perf_counter() - t0 < 5, "refused only after it worked"  # a bound on work done, not a timing
    assert os.listdir(tmp_path) == []


def test_an_unknown_accelerator_stops_before_any_data_is_made(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "kit"))
    assert main(["ablation", "--accelerator", "tpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("labkit ablation: no simulated accelerator 'tpu'; pick one of a100,"), err
    assert os.listdir(tmp_path) == []


def test_a_pack_that_cannot_fit_is_refused_with_both_numbers(photos, small_disk, capsys):
    disk = small_disk(64 << 10)
    for extra in ([], ["--decoded", "64"]):
        assert main(["pack", photos, os.path.join(disk, "x.pack"), "--no-progress", *extra]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "x.pack needs " in err and "and its file system has " in err, err
    assert os.listdir(disk) == []


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_disk_that_fills_anyway_is_one_line_and_leaves_nothing(photos, small_disk, capsys, monkeypatch, workers):
    import labkit.storage.packing as packing

    disk = small_disk(96 << 10)
    monkeypatch.setattr(packing, "require_space", lambda *a, **k: None)  # as if another writer filled it after
    assert main(["pack", photos, os.path.join(disk, "x.pack"), "--no-progress", "--workers", workers]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.pack: the disk filled up after " in err and "had been written" in err, err
    assert os.listdir(disk) == []


def test_data_on_a_full_disk_is_refused_and_a_checkpoint_keeps_the_previous_one(small_disk, capsys):
    import torch

    from labkit.distributed.checkpoint import load_checkpoint, save_checkpoint

    disk = small_disk(512 << 10)
    assert main(["data", "--out", os.path.join(disk, "p"), "--n", "40", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs " in err and "(40 images of about " in err, err
    path = os.path.join(disk, "ckpt.pt")
    save_checkpoint({"step": 1}, path)
    with pytest.raises(OSError, match="ckpt.pt needs .* and its file system has"):
        save_checkpoint({"step": 2, "w": torch.zeros(1 << 18)}, path)  # 1 MiB
    assert load_checkpoint(path) == {"step": 1} and sorted(os.listdir(disk)) == ["ckpt.pt", "p"]


def test_staging_shards_that_cannot_fit_copies_none(tmp_path, small_disk):
    from labkit.distributed.ranks import stage_to_local

    shards = []
    for k in range(3):
        shards.append(tmp_path / f"shard{k}.pack")
        shards[-1].write_bytes(os.urandom(100 << 10))
    disk = small_disk(200 << 10)
    with pytest.raises(OSError, match=r"needs 300.0 KiB \(3 shards to copy\)"):
        stage_to_local(shards, disk, local_rank=0)
    assert os.listdir(disk) == []


def _run_labkit(argv, env, signal_when=None, sig=signal.SIGINT, delay=0.0):
    """``labkit ARGV`` in its own process group; ``sig`` sent to the whole group (as a terminal sends Ctrl-C to
    every process of a command) ``delay`` s after ``signal_when()`` first holds, polled every 10 ms. Returns
    (exit code, stderr, pids left in the group)."""
    import psutil

    child = subprocess.Popen(
        [sys.executable, "-m", "labkit", *argv, "--no-progress"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if signal_when is not None:
        while not signal_when() and child.poll() is None:
            time.sleep(0.01)
        time.sleep(delay)
        os.killpg(child.pid, sig)
    err = child.communicate(timeout=120)[1]
    time.sleep(0.3)
    left = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == child.pid and process.status() != psutil.STATUS_ZOMBIE:
                left.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return child.returncode, err, left


def _env(tmp_path):
    return {**os.environ, "LABKIT_DATA": str(tmp_path / "kit"), "LABKIT_QUICK": "1"}


def _temporaries(root):
    return [f for f in files_under(root) if ".tmp-" in f]


@pytest.fixture(scope="module")
def slow_photos(tmp_path_factory):
    """200 photos of 800x600: packing them decoded takes a second or more on 2 cores, long enough to interrupt."""
    from labkit.harness.synthetic_data import PhotoSpec, make_photos

    root = str(tmp_path_factory.mktemp("slow") / "photos")
    make_photos(root, PhotoSpec(n=200, classes=4), progress=False)
    return root


def _appears(pattern):
    import glob

    return lambda: bool(glob.glob(pattern, recursive=True))


@pytest.mark.timeout(240)
def test_ctrl_c_exits_130_with_one_line_its_temporaries_removed_and_no_worker_left(slow_photos, photos, tmp_path):
    env = _env(tmp_path)
    pack = tmp_path / "x.pack"
    cases = [  # each interrupted once its work has started, well before it can end
        (["pack", slow_photos, str(pack), "--decoded", "256", "--workers", "2"], _appears(f"{pack}.tmp-*"), 0.0),
        (
            ["data", "--out", str(tmp_path / "made"), "--n", "400", "--workers", "2"],
            _appears(f"{tmp_path}/made/*/*.jpg"),
            0.0,
        ),
        (
            [
                "ablation",
                "--data",
                photos,
                "--only",
                "v1,v2",
                "--workers",
                "2",
                "--runs",
                "5",
                "--steps",
                "30",
                "--batch",
                "8",
            ],
            _appears(f"{tmp_path}/kit/derived/*/photos-256.pack"),
            1.0,
        ),
    ]
    for argv, started, delay in cases:
        code, err, left = _run_labkit(argv, env, signal_when=started, delay=delay)
        assert code == 130, (argv[0], code, err)
        assert err.strip().splitlines() == [f"labkit {argv[0]}: interrupted; no half-written file was kept"], err
        assert left == [], f"{argv[0]} left processes running: {left}"
        assert _temporaries(tmp_path) == []
    assert not os.path.exists(pack)


@pytest.mark.timeout(240)
def test_a_pack_killed_at_any_moment_leaves_a_sound_pack_or_a_temporary_the_next_run_removes(slow_photos, tmp_path):
    env = _env(tmp_path)
    target = tmp_path / "x.pack"
    rng = random.Random(0)
    killed_mid_write = 0
    for _k in range(4):
        code, _, left = _run_labkit(
            ["pack", slow_photos, str(target), "--decoded", "256", "--workers", "2"],
            env,
            signal_when=_appears(f"{target}.tmp-*"),
            sig=signal.SIGKILL,
            delay=rng.uniform(0.0, 1.0),
        )
        assert left == [], "the pool's processes outlived their killed parent"
        if os.path.exists(target):
            verify_pack(target)  # whatever is under the name is whole
        leftovers = _temporaries(tmp_path)
        killed_mid_write += bool(leftovers)
        code, err, _ = _run_labkit(["pack", slow_photos, str(target), "--workers", "1"], env)
        assert code == 0, err
        assert _temporaries(tmp_path) == []
        if leftovers:
            assert "x.pack: removed 1 temporary file left by writers no longer running (" in err, err
        verify_pack(target)
        os.unlink(target)
    assert killed_mid_write, "no kill landed while the pack was being written: nothing was tested"


def test_course_writes_both_editions_student_edition_and_refuses_check_without_translate(tmp_path, capsys):
    out = tmp_path / "student"
    assert main(["course", "--student", str(out)]) == 0
    assert (out / "00_start_here.ipynb").exists() and (out / "zh" / "00_start_here.ipynb").exists()
    assert (out / "zh" / "reference").is_dir() and "zh/: the same notebooks in that language" in capsys.readouterr().out
    assert main(["course", "--student", str(tmp_path / "other"), "--check"]) == 2
    assert "--check and --todo go with --translate" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
