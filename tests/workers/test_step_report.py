"""labkit.workers.step_report: the seed's data-bound rule, and a report's shares, speed and plot."""

import matplotlib
import pytest

from labkit.workers.step_report import DATA_BOUND, MODEL_BOUND, LoaderReport, data_bound_diagnosis

matplotlib.use("Agg")


def test_the_data_bound_diagnosis_follows_the_seed_s_thresholds():
    assert (DATA_BOUND, MODEL_BOUND) == (0.30, 0.10)
    assert data_bound_diagnosis(0.5).startswith("data-bound") and data_bound_diagnosis(0.31).startswith("data-bound")
    assert data_bound_diagnosis(0.05).startswith("compute-bound") and data_bound_diagnosis(0.2).startswith("balanced")


def test_a_report_adds_up_its_steps_and_reads_the_rule_from_its_own_shares():
    report = LoaderReport([0.04, 0.06], [0.0, 0.0], [0.06, 0.04], images=128, has_model=True)
    assert report.step_s == pytest.approx([0.1, 0.1]) and report.data_share == pytest.approx(0.5)
    copied = LoaderReport([0.04, 0.06], [0.0, 0.02], [0.06, 0.02], images=128, has_model=True)
    assert copied.compute_share == pytest.approx(0.4)  # the model's (the device's) share: 80 of 200 ms
    assert report.images_per_s == pytest.approx(640) and report.diagnosis.startswith("data-bound: 50%")
    assert "2 steps, median ms: wait for data 50.0, transfer 0.0, compute 50.0, step 100.0" in str(report)
    alone = LoaderReport([0.01], [0.0], [0.0], images=64, has_model=False)
    assert alone.diagnosis.startswith("no model step given") and len(report.plot().patches) == 6
