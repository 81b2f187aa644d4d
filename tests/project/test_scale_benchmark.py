"""benchmarks/scale.py's pieces on a tiny data set: slopes, missing peers skipped, cold passes really cold."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def scale():
    spec = importlib.util.spec_from_file_location("scale_benchmark", os.path.join(ROOT, "benchmarks", "scale.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_log_slope_reads_how_a_cost_grows(scale):
    sizes = [1_000, 10_000, 100_000]
    assert scale.log_slope(sizes, [2e-3 * n for n in sizes]) == pytest.approx(1.0)
    assert scale.log_slope(sizes, [n**2 for n in sizes]) == pytest.approx(2.0)
    assert scale.log_slope(sizes, [5.0, 5.0, 5.0]) == pytest.approx(0.0, abs=1e-9)


def test_each_peer_is_either_usable_or_named_with_the_fix(scale):
    for name, state in scale.available_peers().items():
        assert state == "ok" or ("not usable" in state and "[peers]" in state), (name, state)


@pytest.mark.timeout(120)
def test_stores_skip_a_missing_peer_and_read_cold_after_emptying(scale, tmp_path, monkeypatch):
    # data under the project's disk, not tmpfs: a tmpfs file's pages cannot be dropped
    data = os.path.join(ROOT, "data", ".scale-test")
    monkeypatch.setenv("LABKIT_DATA", data)
    peers = dict(scale.available_peers(), lmdb='not usable (ImportError: test); pip install -e ".[peers]"')
    scratch = os.path.join(data, "scratch")
    os.makedirs(scratch, exist_ok=True)
    try:
        result = scale.stores(40, peers, scratch, max_reads=40, system_drop=False)
    finally:
        import shutil

        shutil.rmtree(data, ignore_errors=True)
    assert "lmdb" not in result["images_per_s"] and "lmdb" in result["skipped"]
    assert {"folder", "labkit pack"} <= set(result["images_per_s"])
    for rates in result["images_per_s"].values():
        assert set(rates) == {f"{o} {t}" for o in ("random", "block-shuffled") for t in ("warm", "cold")}
        assert all(r > 0 for r in rates.values())
    assert result["cold_cache_emptied_by"].startswith("posix_fadvise(DONTNEED)")
    assert result["cold_resident_before"]["labkit pack"]["random"] < 0.1  # no mapping of the warm pass kept it


def test_a_cold_storage_run_is_kept_in_the_history_with_its_verdicts(scale):
    def run(rate, cached):
        return {"images_per_s": rate, "step_s": 64 / rate, "cache": {"resident_before": cached}}

    result = {
        "versions": {
            "v2": {"warm": run(190.0, 1.0), "cold": run(176.0, 0.0)},
            "v3": {"warm": run(181.0, 0.99), "cold": run(192.0, 0.0)},
        },
        "v3_over_v2": {"warm": 181 / 190, "cold": 192 / 176},
        "v6_cold_share_of_disk": 0.92,
        "cold_batches_images_per_s": {"random batches": 3323.0},
        "disk_sequential_mb_s": 653.0,
    }
    record = scale.cold_storage_record(result, "second run")
    assert record["note"] == "second run" and record["v3_over_v2"] == result["v3_over_v2"]
    assert record["images_per_s"] == {"v2": {"warm": 190.0, "cold": 176.0}, "v3": {"warm": 181.0, "cold": 192.0}}
    assert record["warm_resident_before"] == {"v2": 1.0, "v3": 0.99}
    assert record["disk_sequential_mb_s"] == 653.0 and record["v6_cold_share_of_disk"] == 0.92
