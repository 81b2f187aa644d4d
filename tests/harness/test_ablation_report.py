"""Reading ablation reports: reference runs as speed-ups over their own v1, and the knobs each version moved."""

import json

import matplotlib
import pytest

from labkit.harness.ablation_report import AblationRun, changed_knobs, plot_speedups, reference_runs, results_folder

matplotlib.use("Agg")


def _report(device="cpu", gpu="cpu", cpus=2, rates=(("v1", 100.0), ("v2", 180.0)), model=False):
    loaders = {
        "v1": {"num_workers": 0, "decoder": "pil", "pin_memory": False},
        "v2": {"num_workers": 2, "decoder": "pil", "pin_memory": True},
        "v6": {"num_workers": 0, "decoder": "none", "pin_memory": False},
    }
    return {
        "machine": {"cpu_count": cpus, "device": gpu},
        "settings": {"device": device, "model": model},
        "versions": [{"id": vid, "images_per_s": rate, "loader": loaders.get(vid, {})} for vid, rate in rates],
    }


def test_runs_are_read_from_a_folder_as_speedups_over_their_own_v1(tmp_path):
    (tmp_path / "ablation_2cpu.json").write_text(json.dumps(_report()))
    (tmp_path / "ablation_gpu.json").write_text(
        json.dumps(_report("cuda", "NVIDIA H200", 16, (("v1", 400.0), ("v2", 2000.0), ("v8", 8000.0)), model=True))
    )
    (tmp_path / "soak_2cpu.json").write_text("{}")  # another benchmark: not matched
    cpu, gpu = reference_runs(str(tmp_path))
    assert (cpu.name, gpu.name) == ("ablation_2cpu", "ablation_gpu")
    assert cpu.speedups == {"v1": 1.0, "v2": pytest.approx(1.8)} and not cpu.on_gpu
    assert gpu.speedups["v8"] == pytest.approx(20.0) and gpu.on_gpu
    assert gpu.label == "ablation_gpu: 16 CPUs, NVIDIA H200, model step" and "CPU only" in cpu.label


def test_a_run_without_v1_has_no_speedups_and_is_left_out_of_the_plot():
    partial = AblationRun.from_report("partial", _report(rates=(("v2", 180.0),)))
    full = AblationRun.from_report("full", _report(rates=(("v1", 100.0), ("v2", 180.0), ("v6", 900.0))))
    assert partial.speedups == {}
    ax = plot_speedups([partial, full])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["v1", "v2", "v6"]
    assert [text.get_text() for text in ax.get_legend().get_texts()] == [full.label]
    assert [round(p.get_height(), 3) for p in ax.patches] == [1.0, 1.8, 9.0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0  # throughput from 0, as the course's plots
    assert [t.get_text() for t in ax.texts] == ["1.0", "1.8", "9.0"]  # each bar says its factor


def test_a_file_that_is_not_an_ablation_report_is_named(tmp_path):
    (tmp_path / "ablation_bad.json").write_text(json.dumps({"trials": []}))
    with pytest.raises(ValueError, match="ablation_bad.json has no 'versions'"):
        reference_runs(str(tmp_path))
    (tmp_path / "ablation_bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="ablation_bad.json is not an ablation report"):
        reference_runs(str(tmp_path))


def test_changed_knobs_lists_what_each_version_sets_differently_from_v1():
    knobs = changed_knobs(_report(rates=(("v1", 1.0), ("v2", 2.0), ("v6", 3.0))))
    assert knobs == {"v1": [], "v2": ["num_workers: 2", "pin_memory: True"], "v6": ["decoder: none"]}
    assert changed_knobs(_report(rates=(("v2", 2.0),))) == {"v2": []}


def test_the_clones_committed_reference_runs_are_found():
    folder = results_folder()
    assert folder is not None and folder.endswith("results")
    runs = reference_runs()
    assert runs and all(r.name.startswith("ablation_") and r.speedups["v1"] == 1.0 for r in runs)
