"""The ablation's version table: one row per version, the seed's figures on its four, labkit's built by make_loader."""

import pytest

from labkit.core import cpus as cpu_budget_module
from labkit.harness.ablation_versions import (
    OUTPUT_SIZE,
    TRAIN_OUTPUT_SIZE,
    TRAINING_VERSIONS,
    VERSIONS,
    AblationSettings,
)


def test_each_version_is_one_row_the_seed_s_four_with_its_step_times_and_labkit_s_by_make_loader():
    rows = VERSIONS + TRAINING_VERSIONS
    assert len({v.id for v in rows}) == len(rows)
    assert [v.seed_step_s for v in VERSIONS[:4]] == [0.58, 0.35, 0.26, 0.21]
    assert not any(v.by_make_loader for v in VERSIONS[:4]) and all(v.by_make_loader for v in VERSIONS[4:])
    assert [v.id for v in VERSIONS if v.cuda_only] == ["v8"]
    assert {v.output_size for v in VERSIONS} == {OUTPUT_SIZE} and {v.output_size for v in TRAINING_VERSIONS} == {
        TRAIN_OUTPUT_SIZE
    }


def test_the_settings_take_the_cpu_budget_unless_told_and_leave_a_core_for_a_model(monkeypatch):
    monkeypatch.setattr(cpu_budget_module, "usable_cpus", lambda: 8)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    alone, with_model = AblationSettings(), AblationSettings(model=True)
    assert alone.resolved_num_workers() > with_model.resolved_num_workers() >= 1
    assert AblationSettings(num_workers=3).resolved_num_workers() == 3
    assert AblationSettings(device="cpu").resolved_device().type == "cpu"


@pytest.mark.parametrize("vid", ["v1", "t1"])
def test_the_seed_s_baselines_normalise_in_the_workers_and_labkit_s_on_the_device(vid):
    row = {v.id: v for v in VERSIONS + TRAINING_VERSIONS}[vid]
    assert row.normalize_in_workers and not row.workers
