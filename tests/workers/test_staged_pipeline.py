import functools
import multiprocessing
import os

import numpy as np
import pytest

from labkit.decode.decoder_contract import DecodeError
from labkit.harness.clips import ClipFolderDataset, decode_clip, scan_clips, transform_clip
from labkit.harness.synthetic_data import ClipSpec, make_clips
from labkit.workers.staged_pipeline import PipelineError, StagedPipeline, segment_exists

SPEC = ClipSpec(n=6, classes=2, frames=4, width=64, height=48, seed=1)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("clips") / "clips")
    make_clips(root, SPEC, workers=1, progress=False)
    return root


def _folders(root):
    _, rel, _ = scan_clips(root)
    return [os.path.join(root, r) for r in rel]


def _stage1():
    return functools.partial(decode_clip, frames=SPEC.frames, size=(SPEC.height, SPEC.width))


def _stage2(frames):
    return transform_clip(frames, out=32, resize=40)


def _no_children_and_no_segment(name):
    assert multiprocessing.active_children() == []
    assert not os.path.exists(f"/dev/shm/{name.lstrip('/')}")


def test_clips_are_made_whole_and_resumable(clips):
    classes, rel, labels = scan_clips(clips)
    assert len(rel) == 6 and len(classes) == 2 and labels.tolist().count(0) == 3
    assert all(len(os.listdir(os.path.join(clips, r))) == 4 for r in rel)
    again = make_clips(clips, SPEC, workers=1, progress=False)
    assert again.endswith("6 clips of 4 frames, 64x48 (0 written by this run, 6 already there and complete)")


@pytest.mark.timeout(60)
def test_two_stages_give_what_one_stage_gives(clips):
    single = ClipFolderDataset(clips, SPEC.frames, (SPEC.height, SPEC.width), out=32)
    pipe = StagedPipeline(
        _folders(clips), _stage1(), _stage2, (4, 48, 64, 3), num_decoders=2, num_transformers=1, slots=3
    )
    results = dict(pipe)
    assert sorted(results) == list(range(6))
    for k in range(6):
        assert results[k].shape == (4, 3, 32, 32)
    assert pipe.shm is None and multiprocessing.active_children() == []
    reference = np.asarray(transform_clip(decode_clip(single.clip_path(2), 4, (48, 64)), 32, 40))
    assert np.array_equal(results[2], reference)


@pytest.mark.timeout(60)
def test_stage_one_failure_names_stage_and_item_and_cleans_up(clips, tmp_path):
    broken = str(tmp_path / "broken")
    os.makedirs(broken)
    open(os.path.join(broken, "frame000.jpg"), "wb").write(b"not a jpeg")
    items = _folders(clips)[:2] + [broken] + _folders(clips)[2:]
    pipe = StagedPipeline(items, _stage1(), _stage2, (4, 48, 64, 3), num_decoders=2, slots=2)
    with pytest.raises(PipelineError, match=r"stage 1 \(decode\) failed on item 2 .*broken"):
        list(pipe)
    assert pipe.shm is None and multiprocessing.active_children() == []


def test_a_broken_frame_is_named_with_its_file(clips, tmp_path):
    broken = str(tmp_path / "clip")
    frames = _folders(clips)[0]
    os.makedirs(broken)
    for name in sorted(os.listdir(frames)):
        data = open(os.path.join(frames, name), "rb").read()
        open(os.path.join(broken, name), "wb").write(data[: len(data) // 3] if name == "frame002.jpg" else data)
    with pytest.raises(DecodeError, match=r"frame002\.jpg: .*bytes starting") as e:
        decode_clip(broken, SPEC.frames, (SPEC.height, SPEC.width))
    assert "object at 0x" not in str(e.value)


def _fail_in_stage_two(frames):
    raise RuntimeError("transform bug")


@pytest.mark.timeout(60)
def test_stage_two_failure_is_named(clips):
    pipe = StagedPipeline(_folders(clips), _stage1(), _fail_in_stage_two, (4, 48, 64, 3))
    with pytest.raises(PipelineError, match=r"stage 2 \(transform\) failed on item \d+ .*transform bug"):
        list(pipe)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(60)
def test_ctrl_c_and_break_leave_no_process_and_no_shared_memory(clips):
    pipe = StagedPipeline(_folders(clips) * 4, _stage1(), _stage2, (4, 48, 64, 3), num_decoders=2, slots=2)
    iterator = iter(pipe)
    next(iterator)
    name = pipe.shm.name
    with pytest.raises(KeyboardInterrupt):
        iterator.throw(KeyboardInterrupt)
    _no_children_and_no_segment(name)
    for _ in pipe:
        break
    assert multiprocessing.active_children() == []


def _die(item):
    os._exit(3)


@pytest.mark.timeout(60)
def test_a_dead_worker_is_reported(clips):
    pipe = StagedPipeline(_folders(clips), _die, _stage2, (4, 48, 64, 3))
    with pytest.raises(PipelineError, match=r"stage1-0 \(pid \d+\) died \(exit code 3\)"):
        list(pipe)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(60)
def test_the_ring_is_named_while_it_runs_and_gone_after_an_interrupt(clips):
    pipe = StagedPipeline(_folders(clips), _stage1(), _stage2, (4, 48, 64, 3), slots=2)
    assert pipe.segment is None
    with pytest.raises(KeyboardInterrupt):
        for _ in pipe:
            assert segment_exists(pipe.segment)
            raise KeyboardInterrupt  # what Ctrl-C raises in the loop
    assert pipe.segment and not segment_exists(pipe.segment)
    assert multiprocessing.active_children() == []


class _KillsItsProcess:
    """A stage function whose process SIGKILLs itself ``delay`` s after it starts item ``at``."""

    def __init__(self, at, delay, out):
        self.at, self.delay, self.out = at, delay, out

    def __call__(self, item):
        import signal
        import threading

        import torch

        if (item if isinstance(item, int) else int(item.flat[0])) == self.at:
            threading.Timer(self.delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
        return (
            np.full((8, 8), item if isinstance(item, int) else item.flat[0], np.uint8)
            if self.out == "array"
            else torch.full((3, 32, 32), int(item.flat[0]), dtype=torch.uint8)
        )  # a tensor: handed over by descriptor


def _to_array(item):
    return np.full((8, 8), item, np.uint8)


def _to_tensor(frame):
    import torch

    return torch.from_numpy(frame.copy())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_a_stage_process_killed_at_any_moment_is_named_every_time(context, no_leaks):
    import random
    import re

    rng = random.Random(len(context))
    wrong = []
    runs = 30 if context == "fork" else 15  # each forkserver run starts two fresh processes
    for run in range(runs):
        stage = rng.choice([1, 2])
        killer = _KillsItsProcess(
            at=rng.randrange(4, 16), delay=rng.uniform(0.0, 0.02), out="array" if stage == 1 else "tensor"
        )
        pipe = StagedPipeline(
            list(range(40)),
            killer if stage == 1 else _to_array,
            killer if stage == 2 else _to_tensor,
            (8, 8),
            slots=rng.choice([2, 4]),
            context=context,
        )
        try:
            for _ in pipe:
                pass
            error = None
        except Exception as e:  # noqa: BLE001 - judged below
            error = e
        if not (
            isinstance(error, PipelineError)
            and re.search(rf"stage{stage}-0 \(pid \d+\) died \(exit code -9, killed by SIGKILL\)", str(error))
        ):
            wrong.append(f"run {run} (stage {stage} killed): {type(error).__name__}: {error}")
        assert multiprocessing.active_children() == [] and not segment_exists(pipe.segment)
    assert not wrong, f"{len(wrong)} of {runs} runs did not name the killed stage:\n" + "\n".join(wrong[:5])


@pytest.mark.timeout(60)
def test_a_stage_killed_after_the_last_item_is_still_named(no_leaks):
    # the kill lands after every result has arrived: the data is whole, but a stage did not end by itself
    pipe = StagedPipeline(list(range(12)), _KillsItsProcess(at=11, delay=0.3, out="array"), _to_tensor, (8, 8), slots=2)
    got = []
    with pytest.raises(
        PipelineError,
        match=r"stage1-0 \(pid \d+\) died \(exit code -9, killed by SIGKILL\) while the "
        "pipeline ran: every item was delivered",
    ):
        for index, _ in pipe:
            got.append(index)
    assert sorted(got) == list(range(12))
    assert multiprocessing.active_children() == [] and not segment_exists(pipe.segment)


@pytest.mark.timeout(60)
def test_a_persistent_pipeline_keeps_its_processes_and_ring_until_closed(clips):
    with StagedPipeline(_folders(clips), _stage1(), _stage2, (4, 48, 64, 3), slots=3, persistent=True) as pipe:
        first = dict(pipe)
        pids, segment = sorted(p.pid for p in pipe.processes), pipe.segment
        second = dict(pipe)
        assert sorted(p.pid for p in pipe.processes) == pids and pipe.segment == segment and segment_exists(segment)
        assert sorted(first) == sorted(second) == list(range(6))
        assert all(np.array_equal(first[k], second[k]) for k in first)
        for _ in pipe:
            break  # an iteration that ends early stops everything, persistent or not
        assert pipe.processes == [] and not segment_exists(segment) and multiprocessing.active_children() == []
        assert len(dict(pipe)) == 6 and pipe.segment != segment  # the next one starts afresh
    _no_children_and_no_segment(pipe.segment)
