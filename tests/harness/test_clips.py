"""labkit.harness.clips: clip loaders measured side by side, a DataLoader and a StagedPipeline on the same clips."""

import multiprocessing

import numpy as np
import pytest

from labkit.harness.clips import STAGES, ClipFolderDataset, ClipWork, LoaderRunner, PipelineRunner, time_clip_stages
from labkit.harness.synthetic_data import ClipSpec, make_clips
from labkit.workers.staged_pipeline import PipelineError

SPEC = ClipSpec(n=5, classes=2, frames=3, width=64, height=48, seed=2)
WORK = ClipWork(SPEC.frames, (SPEC.height, SPEC.width), out=32, resize=40)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("clips") / "clips")
    make_clips(root, SPEC, workers=1, progress=False)
    return root


def _check(run, processes):
    assert len(run.arrivals) == SPEC.n and run.clips_per_s > 0
    assert all(lat > 0 for lat in run.latencies_s)
    assert sorted(e["stage"] for e in run.events) == sorted(STAGES * SPEC.n)  # each clip: one call of each
    assert len({e["pid"] for e in run.events}) <= processes
    assert set(run.stage_ms()) == set(STAGES) and all(0 < share <= 1.01 for share in run.busy().values())
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(120)
def run_dataloader(root, work, num_workers):
    """One pass through a DataLoader whose workers are started for it and stopped after."""
    with LoaderRunner(root, work, num_workers) as runner:
        return runner.run()


def run_pipeline(root, work, num_decoders, num_transformers, items=None):
    """One pass through a `StagedPipeline` started for it and stopped after."""
    with PipelineRunner(root, work, num_decoders, num_transformers, items=items) as runner:
        return runner.run()


def test_dataloader_run_logs_both_steps_of_every_clip(clips):
    _check(run_dataloader(clips, WORK, num_workers=2), 2)
    single = run_dataloader(clips, WORK, num_workers=0)
    _check(single, 1)
    assert str(single).startswith("DataLoader, 0 workers: 5 clips in")


@pytest.mark.timeout(120)
def test_pipeline_run_logs_each_stage_in_its_own_processes(clips):
    run = run_pipeline(clips, WORK, num_decoders=1, num_transformers=2)
    _check(run, 3)
    decode_pids = {e["pid"] for e in run.events if e["stage"] == "decode"}
    transform_pids = {e["pid"] for e in run.events if e["stage"] == "transform"}
    assert len(decode_pids) == 1 and not decode_pids & transform_pids


@pytest.mark.timeout(120)
def test_a_bad_item_fails_the_pipeline_run_by_name(clips, tmp_path):
    with pytest.raises(PipelineError, match=r"stage 1 \(decode\) failed on item 1 .*no-such-clip"):
        good = ClipFolderDataset(clips, SPEC.frames, WORK.size).clip_path(0)
        run_pipeline(clips, WORK, 1, 1, items=[good, str(tmp_path / "no-such-clip"), good])
    assert multiprocessing.active_children() == []


def test_stage_times_in_process(clips):
    seconds = time_clip_stages(clips, WORK, clips=3)
    assert [len(seconds[s]) for s in STAGES] == [3, 3] and np.all(np.array(seconds["decode"]) > 0)
    assert WORK.frame_shape == (3, 48, 64, 3)


def test_plot_draws_a_lane_per_process(clips):
    import matplotlib

    matplotlib.use("Agg")
    run = run_pipeline(clips, WORK, num_decoders=1, num_transformers=1)
    ax = run.plot()
    assert len(ax.get_yticks()) == 3  # main loop + 2 processes
    assert len(ax.patches) >= 2 * SPEC.n


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "make",
    [
        lambda root: LoaderRunner(root, WORK, num_workers=2),
        lambda root: PipelineRunner(root, WORK, num_decoders=1, num_transformers=1),
    ],
    ids=["dataloader", "pipeline"],
)
def test_a_runner_reuses_its_processes_for_every_pass(clips, make):
    with make(clips) as runner:
        runs = [runner.run() for _ in range(2)]
        for run in runs:  # each pass logs its own clips only, though the log is the runner's
            assert len(run.arrivals) == SPEC.n and sorted(e["stage"] for e in run.events) == sorted(STAGES * SPEC.n)
            assert run.start == min(e["start"] for e in run.events)  # the clock starts at the first stage call
        pids = [{e["pid"] for e in run.events} for run in runs]
        assert pids[0] == pids[1] and len(pids[0]) == 2  # the same two processes did both passes
        assert len(multiprocessing.active_children()) == 2
    assert multiprocessing.active_children() == []
