import json
import os

import pytest

from labkit.core.errors import LabkitError
from labkit.device.simulated_accelerator import AcceleratorModel
from labkit.diagnose.autotuner import Budget
from labkit.harness.ablation import (
    Result,
    budget_note,
    format_table,
    run_ablation,
    seed_notes,
    training_notes,
)
from labkit.harness.ablation_versions import (
    TRAINING_VERSIONS,
    VERSIONS,
    AblationSettings,
)
from labkit.measure.process_memory import describe_tree_memory, tree_memory_measure

V = {v.id: v for v in VERSIONS + TRAINING_VERSIONS}


def _result(vid, images_per_s, seed, runs=None):
    return Result(
        vid,
        vid,
        images_per_s,
        64 / images_per_s,
        runs or [images_per_s * 0.99, images_per_s * 1.01],
        0.9,
        100.0,
        None,
        seed,
    )


def test_seed_claims_are_judged_from_the_runs_with_the_seeds_size():
    results = [_result("v1", 100, 0.58), _result("v2", 180, 0.35), _result("v3", 181, 0.26), _result("v4", 150, 0.21)]
    notes = seed_notes(results)
    assert notes[0].endswith(
        "Verdict: v2 faster than v1: held (1.80x, 1.76-1.84x over 2 + 2 passes); the article "
        "measured 1.66x: that size was exceeded (here 1.80x)"
    )
    assert "v3 faster than v2: did not hold" in notes[1] and "v4 faster than v3: did not hold" in notes[2]
    assert notes[0].startswith("0.640 s -> 0.356 s per step")
    noisy = seed_notes([_result("v1", 100, 0.58, [80, 120]), _result("v2", 150, 0.35, [110, 190])])
    assert "within noise" in noisy[0] and "that size is within this run's spread" in noisy[0]
    single = seed_notes([_result("v1", 100, 0.58, [100]), _result("v2", 150, 0.35, [150])])
    assert single[0].endswith("from one run each: no verdict (measure --runs 2 or more)")
    table = format_table(
        results,
        {"v8": "needs a CUDA device"},
        {"cpu_count": 2, "cpu": "x", "device": "cpu", "torch": "t", "torchvision": "tv"},
        "header",
        notes,
    )
    assert "v8  not run: needs a CUDA device" in table and "0.58" in table


def test_peak_memory_is_checked_against_the_autotuners_budget():
    results = [_result("v1", 100, 0.58), _result("v5", 300, None)]
    results[1].peak_memory_mb = 2300.0
    assert "within the autotuner's budget" in budget_note(results, Budget(4 * 2**30, 2**30))
    assert "v5 2300 MiB" in budget_note(results, Budget(2 * 2**30, 2**30))
    assert "v1" not in budget_note(results, Budget(2 * 2**30, 2**30))


def test_against_a_simulated_accelerator_its_busy_share_is_reported_and_named(ws, capsys):
    gpu = AcceleratorModel("test GPU", "a test model", 200.0, "a test")  # 40 ms a batch of 8: a busy share to read
    report = run_ablation(
        ws,
        AblationSettings(
            batch_size=8, num_workers=1, runs=1, steps=2, min_seconds=0.0, device="cpu", model=True, accelerator=gpu
        ),
        only=["v6"],
        progress=False,
    )
    busy = report["versions"][0]["gpu_busy"]
    assert busy is not None and 0 < busy <= 1
    assert "with a model step on a simulated test GPU (a test model, 200 images/s published by a test)" in (
        capsys.readouterr().out
    )


@pytest.mark.timeout(60)
def test_a_short_real_run_writes_json_and_plot(ws, tmp_path, capsys):
    out, png = str(tmp_path / "a.json"), str(tmp_path / "a.png")
    report = run_ablation(
        ws,
        AblationSettings(batch_size=8, num_workers=1, runs=1, steps=1, min_seconds=0.0, device="cpu"),
        only=["v1", "v3", "v6"],
        json_path=out,
        plot_path=png,
        progress=False,
    )
    saved = json.load(open(out))
    assert [v["id"] for v in saved["versions"]] == ["v1", "v3", "v6"] == [v["id"] for v in report["versions"]]
    assert all(v["images_per_s"] > 0 and v["peak_memory_mb"] > 0 for v in saved["versions"])
    assert saved["peak_memory"] == describe_tree_memory()
    assert saved["machine"]["cpu_count"] >= 1 and saved["versions"][0]["seed_step_s"] == 0.58
    assert open(png, "rb").read(4) == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "v3 vs v2" not in printed  # no v2 measured: no claim checked against it
    assert f"{tree_memory_measure()} MiB: peak {describe_tree_memory()}" in printed  # the column says what it is
    assert saved["memory_budget"]["ram_bytes"] > 0 and any("autotuner's" in n for n in saved["notes"])
    # v6 normalises on the device: its stage is timed; no version picks a decoder by speed: none is timed
    assert any(n.startswith("device stage") for n in saved["notes"])
    assert not any(n.startswith("decoders timed") for n in saved["notes"])
    assert saved["settings"]["fastest_decoder"] is None


@pytest.mark.timeout(60)
def test_the_decoders_are_timed_only_for_a_version_that_picks_the_fastest(ws, monkeypatch):
    import labkit.harness.ablation as ablation

    timed = []
    monkeypatch.setattr(ablation, "fastest_decoder", lambda ws, crops=False: timed.append(1) or ("pil", {"pil": 0.001}))
    settings = AblationSettings(batch_size=8, num_workers=1, runs=1, steps=1, min_seconds=0.0, device="cpu")
    report = run_ablation(ws, settings, only=["v1"], progress=False)
    assert not timed and not any(n.startswith(("decoders timed", "device stage")) for n in report["notes"])
    report = run_ablation(ws, settings, only=["v5"], progress=False)
    assert timed and report["settings"]["fastest_decoder"] == "pil"
    assert any(n.startswith("decoders timed") and n.endswith("v5 uses pil") for n in report["notes"])
    assert any(n.startswith("device stage") for n in report["notes"])


@pytest.mark.timeout(60)
def test_the_report_names_the_data_relative_to_the_working_directory(ws, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(ws.folder))
    report = run_ablation(
        ws,
        AblationSettings(batch_size=8, num_workers=1, runs=1, steps=1, min_seconds=0.0, device="cpu"),
        only=["v6"],
        progress=True,
    )
    captured = capsys.readouterr()
    assert report["settings"]["folder"] == os.path.basename(ws.folder)
    assert ws.folder not in captured.out and f"images from {os.path.basename(ws.folder)} ->" in captured.out
    assert "v6:" in captured.out and "ablation" in captured.err  # the progress bar, one step per version


def test_a_cold_run_says_how_the_cache_was_emptied_and_what_stayed_cached(ws, monkeypatch, capsys):
    import labkit.harness.ablation as ablation
    from labkit.measure.page_cache import empty_page_cache

    # per-file advice only: a test must not drop the whole machine's page cache, even as root
    monkeypatch.setattr(ablation, "empty_page_cache", lambda paths: empty_page_cache(paths, system=False))
    settings = AblationSettings(batch_size=8, num_workers=1, runs=1, steps=1, min_seconds=0.0, device="cpu", cold=True)
    report = run_ablation(ws, settings, only=["v1", "v6"], progress=False)
    v1, v6 = report["versions"]
    assert v1["cache"]["files"] == ws.count and v6["cache"]["files"] == 1
    assert v1["cache"]["emptied_by"].startswith("posix_fadvise(DONTNEED) on")
    assert v1["cache"]["resident_before"] < 0.1  # files read with open(): nothing keeps them cached
    note = next(n for n in report["notes"] if n.startswith("cold run"))
    assert f"v1 {v1['cache']['resident_before']:.1%}" in note and "v6 " in note
    assert note in capsys.readouterr().out


def test_a_warm_run_says_how_much_of_each_versions_data_was_cached(ws, capsys):
    from labkit.storage.packing import read_file

    read_file(os.fsencode(ws.decoded_pack))  # v6's data, all in the page cache
    report = run_ablation(
        ws,
        AblationSettings(batch_size=8, num_workers=1, runs=1, steps=1, min_seconds=0.0, device="cpu"),
        only=["v6"],
        progress=False,
    )
    v6 = report["versions"][0]
    assert v6["cache"]["files"] == 1 and v6["cache"]["resident_before"] > 0.9 and "emptied_by" not in v6["cache"]
    note = next(n for n in report["notes"] if n.startswith("warm run"))
    assert f"v6 {v6['cache']['resident_before']:.1%}" in note and note in capsys.readouterr().out


def test_a_share_of_cached_data_the_os_cannot_read_is_named_not_known():
    from types import SimpleNamespace

    from labkit.harness.ablation import warm_note

    results = [
        SimpleNamespace(id="v2", cache={"resident_before": None}),  # resident_share where there is no mincore
        SimpleNamespace(id="v3", cache={"resident_before": 0.5}),
    ]
    note = warm_note(results)
    assert "v2 not known (page-cache residency not available on" in note and "v3 50.0%" in note


def test_a_cold_run_names_the_process_that_keeps_a_pack_cached(ws, monkeypatch):
    import multiprocessing

    import labkit.harness.ablation as ablation
    from labkit.measure.page_cache import empty_page_cache

    monkeypatch.setattr(ablation, "empty_page_cache", lambda paths: empty_page_cache(paths, system=False))
    ctx = multiprocessing.get_context("fork")
    ready, stop = ctx.Event(), ctx.Event()

    def hold(path):  # another reader of the same pack, as a second notebook would be
        import numpy as np

        mapped = np.memmap(path, dtype=np.uint8, mode="r")
        int(mapped[::4096].sum())
        ready.set()
        stop.wait(30)

    holder = ctx.Process(target=hold, args=(ws.decoded_pack,))
    holder.start()
    try:
        assert ready.wait(30)
        settings = AblationSettings(
            batch_size=8, num_workers=1, runs=1, steps=1, min_seconds=0.0, device="cpu", cold=True
        )
        report = run_ablation(ws, settings, only=["v6"], progress=False)
    finally:
        stop.set()
        holder.join()
    v6 = report["versions"][0]
    assert v6["cache"]["mapped_by_other_processes"] == [holder.pid] and v6["cache"]["resident_before"] > 0.9
    assert f"mapped by process {holder.pid}, which keeps it cached" in next(
        n for n in report["notes"] if n.startswith("cold run")
    )


def test_training_steps_are_judged_one_against_the_one_before_and_t5_against_t1():
    results = [_result("t1", 100, None), _result("t2", 180, None), _result("t5", 300, None)]
    notes = training_notes(results)
    assert [n.split("Verdict: ")[1].split(":")[0] for n in notes] == [
        "t2 faster than t1",
        "t5 faster than t2",
        "t5 faster than t1",
    ]
    assert all(": held (" in n for n in notes) and not any("seed measured" in n for n in notes)


@pytest.mark.timeout(60)
def test_the_training_ablation_runs_its_own_versions_and_refuses_the_others(ws, capsys):
    settings = AblationSettings(batch_size=8, num_workers=1, runs=2, steps=1, min_seconds=0.0, device="cpu")
    report = run_ablation(ws, settings, only=["t1", "t5"], progress=False, train=True)
    assert [v["id"] for v in report["versions"]] == ["t1", "t5"]
    printed = capsys.readouterr().out
    assert "RandomResizedCrop(224) + flip, batch 8" in printed and "vs t1" in printed
    assert "Verdict: t5 faster than t1:" in printed
    with pytest.raises(LabkitError, match="no version v5 in the training ablation; its versions: t1, t2, t3, t5"):
        run_ablation(ws, settings, only=["v5"], progress=False, train=True)
