"""The notebooks' panels, driven through the callbacks their widgets call, without a frontend."""

import os

import numpy as np
import pytest

from labkit.core.machine import MemoryFacts
from labkit.course.panels import LoaderPanel, LoaderSettings, SamplerPanel
from labkit.harness.workspace import Workspace
from labkit.storage.pack_format import PackReader

GIB = 2**30


@pytest.fixture()
def workspace(photos, encoded_pack, decoded_pack):
    reader = PackReader(encoded_pack)
    return Workspace(photos, encoded_pack, decoded_pack, reader.classes, len(reader), os.path.dirname(encoded_pack))


def _panel(workspace, **kwargs):
    settings = LoaderSettings(num_workers=0, batch_size=8, storage="decoded pack")
    return LoaderPanel(workspace, settings=settings, images=16, runs=2, seconds=30, max_workers=2, **kwargs)


def test_each_run_adds_a_history_row_and_a_point_against_the_knob_that_changed(workspace):
    panel = _panel(workspace)
    first = panel.run()
    assert first.settings.num_workers == 0 and first.images_per_s > 0 and first.passes == 2
    second = panel.run(num_workers=1, prefetch_factor=3)
    assert (second.settings.num_workers, second.settings.prefetch_factor) == (1, 3)
    assert panel.x_knob == "num_workers"
    third = panel.run(storage="pack", decoder="pil")
    assert third.settings.storage == "pack" and third.settings.decoder == "pil"
    assert panel.x_knob == "num_workers"  # a new storage is a new series along the same axis
    assert [r.settings for r in panel.history] == [first.settings, second.settings, third.settings]
    data = panel.plot_data()
    assert data["decoded pack"] == ([0, 1], [first.images_per_s, second.images_per_s])
    assert data["pack"] == ([1], [third.images_per_s])
    lows, highs = panel.spreads()["decoded pack"]  # each run's slowest and fastest pass, around its median
    assert all(low <= run.images_per_s <= high for low, high, run in zip(lows, highs, [first, second]))
    assert (lows[0], highs[0]) == (min(first.rates), max(first.rates))
    panel.run(batch_size=16)
    assert panel.x_knob == "batch_size"
    assert panel.plot_data()["pack"][0] == [8, 16]
    assert len(panel.history_table().splitlines()) == 4
    assert panel.figure().axes[0].get_xlabel() == "batch_size"
    assert "<td>16</td>" in panel.table.value


def test_a_setting_that_overflows_dev_shm_is_refused_with_the_doctors_reason(workspace):
    tiny = MemoryFacts(ram_total=8 * GIB, ram_available=4 * GIB, shm_total=2**17, shm_free=2**17)  # 128 KiB
    panel = _panel(workspace, memory=tiny)
    assert panel.refusal() is None  # no workers: batches never pass through /dev/shm
    refused = panel.run(num_workers=2, prefetch_factor=8)
    assert refused.images_per_s is None and "/dev/shm" in refused.note and "fix" in refused.note.lower()
    assert "refused" in str(refused) and panel.plot_data() == {}
    assert "FAIL" in panel.doctor.value and "shared memory" in panel.doctor.value
    assert panel.run(num_workers=0).images_per_s > 0


def test_the_doctor_and_the_decoder_follow_the_controls_before_any_run(workspace):
    panel = _panel(workspace)
    assert panel.controls["decoder"].disabled  # a decoded pack has nothing to decode
    panel.controls["num_workers"].value = 2
    assert "2 workers" in panel.doctor.value and panel.history == []
    panel.controls["storage"].value = "folder"
    assert not panel.controls["decoder"].disabled
    with pytest.raises(TypeError, match="unknown loader setting"):
        panel.run(workers=2)


def test_the_decoder_dropdown_offers_the_decoder_registry(workspace, monkeypatch):
    from labkit.decode import registry

    assert _panel(workspace).controls["decoder"].options == tuple(registry.DECODERS)
    monkeypatch.setitem(registry.DECODERS, "pil-copy", registry.DECODERS["pil"])  # a decoder added to the registry
    assert "pil-copy" in _panel(workspace).controls["decoder"].options  # shows up without a second list to edit


def test_show_without_a_frontend_runs_once_and_prints_its_row(workspace, capsys):
    record = _panel(workspace).show()
    assert str(record) in capsys.readouterr().out


def test_sampler_panel_scores_follow_block_size_and_window(encoded_pack):
    reader = PackReader(encoded_pack)
    n = len(reader)
    labels = np.arange(n) // (n // 3)  # sorted by class, as a packed ImageFolder is
    offsets, lengths = np.arange(n) * 1000, np.full(n, 1000)
    panel = SamplerPanel(labels, offsets, lengths, batch_size=4, block_size=1, window=1, page_size=4000)
    random = panel.scores
    assert sorted(panel.order) == list(range(n))
    local = panel.update(block_size=4, window=1)  # each batch is one block: 1 class, contiguous reads
    assert local.pages_per_batch < random.pages_per_batch and local.class_entropy < random.class_entropy
    assert panel.block_slider.value == 4 and panel.scores == local
    panel.update(block_size=5)
    assert 5 in panel.block_slider.options
    panel.window_slider.value = 16  # the slider's own callback
    assert panel.scores != local and "window 16" in panel.describe()


def test_checklist_reads_the_ticked_boxes_and_refuses_what_cannot_run(capsys):
    from labkit.course.panels import Checklist

    options = [("v1", "baseline"), ("v2", "workers"), ("v8", "GPU decode")]
    picker = Checklist(options, selected=["v2", "v1"], unavailable={"v8": "needs a CUDA device"})
    assert picker.selected == ["v1", "v2"]  # the options' order, not the order asked
    assert picker.boxes["v8"].disabled and "needs a CUDA device" in picker.boxes["v8"].description
    picker.boxes["v2"].value = False  # a learner unticks a box
    assert picker.selected == ["v1"]
    assert picker.show() == ["v1"] and "ticked: v1" in capsys.readouterr().out
    with pytest.raises(ValueError, match="cannot run here: needs a CUDA device"):
        picker.select(["v1", "v8"])
    with pytest.raises(ValueError, match="not an option"):
        picker.select(["v9"])
    assert picker.select([]) == []
    picker.show()
    assert "ticked: nothing" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not among the options"):
        Checklist(options, selected=["v3"])
