import pytest

from labkit.decode.registry import NO_DECODE
from labkit.diagnose.autotuner import Budget, LoaderConfig, autotune, search
from labkit.measure.process_memory import tree_memory_measure
from labkit.samplers.block_shuffle import BlockShuffleSampler

MB = 2**20
BATCH = 64 * 3 * 256 * 256  # 12 MiB of uint8


class CostModel:
    """images/s = per-worker rate x min(workers, cores), prefetch 4 adds 3 %; RSS = 400 MB per worker."""

    RATE = {"pil": 90.0, "pil-reduced": 150.0, "torchvision": 170.0, NO_DECODE: 1500.0}

    def __init__(self, cores=4):
        self.cores, self.calls = cores, []

    def __call__(self, config: LoaderConfig):
        self.calls.append(config)
        rate = (
            self.RATE[config.decoder]
            * min(config.num_workers, self.cores)
            * (1.03 if config.prefetch_factor == 4 else 1.0)
        )
        return rate, 400 * MB * (config.num_workers + 1)


def test_picks_the_fastest_within_budget_and_stops_adding_workers_when_it_stops_paying():
    model = CostModel(cores=4)
    result = search(
        model, ["pil", "torchvision"], max_workers=8, budget=Budget(64 * 2**30, 8 * 2**30), batch_bytes=BATCH
    )
    assert result.best == LoaderConfig("torchvision", 4, 4)
    assert max(c.num_workers for c in model.calls if c.decoder == "pil") == 5  # the 5th worker gained nothing: stop
    assert "decision: decoder=torchvision, num_workers=4, prefetch_factor=4" in str(result)


def test_ram_budget_caps_workers_whatever_the_speed():
    model = CostModel(cores=8)
    result = search(model, ["torchvision"], max_workers=8, budget=Budget(1800 * MB, 8 * 2**30), batch_bytes=BATCH)
    assert result.best.num_workers == 3  # 3 workers + main = 1600 MB fits; 4 + main = 2000 MB does not
    assert any("RAM budget" in t.decision for t in result.trials)


def test_shm_budget_skips_configs_before_running_them():
    model = CostModel(cores=8)
    result = search(model, [NO_DECODE], max_workers=8, budget=Budget(64 * 2**30, 80 * MB), batch_bytes=BATCH)
    # the doctor's count, workers x prefetch + 2 batches of 12 MiB: 2 workers x 2 -> 72 MiB fits,
    # 3 x 2 -> 96 MiB does not; prefetch 4 on 2 workers -> 120 MiB does not
    assert result.best == LoaderConfig(NO_DECODE, 2, 2)
    assert all((c.num_workers * c.prefetch_factor + 2) * BATCH <= 80 * MB for c in model.calls if c.num_workers)
    assert sum("shm budget" in t.decision for t in result.trials) == 2


def test_nothing_fits_is_a_clear_error():
    with pytest.raises(RuntimeError, match="budget"):
        search(CostModel(), ["pil"], max_workers=2, budget=Budget(1, 1), batch_bytes=BATCH)


@pytest.mark.timeout(60)
def test_real_search_on_a_small_pack(encoded_pack, decoded_pack):
    result = autotune(
        encoded_pack, decoded_pack, batch_size=8, size=32, max_workers=2, batches=2, runs=1, decoders=["pil-reduced"]
    )
    assert result.best.decoder in ("pil-reduced", NO_DECODE) and result.best_images_per_s > 0
    assert all(t.peak_memory > 0 for t in result.trials if t.decision != "skipped")
    assert result.memory_measure == tree_memory_measure() and f"peak {result.memory_measure} MiB" in str(result)
    assert result.to_dict()["best"]["num_workers"] in (0, 1, 2)
    assert any(t.config.num_workers == 0 for t in result.trials if t.config.decoder == NO_DECODE)
    # pil-reduced releases the GIL: tried first with no worker processes, decoding threads in the main process
    assert [t.config.num_workers for t in result.trials if t.config.decoder == "pil-reduced"][0] == 0
    assert sum(t.config.sampler == "block" for t in result.trials) == 1  # the batch layout, tried on the winner
    # the loader it measured is make_loader's, with these arguments, and the report says the call
    kwargs = result.loader_kwargs
    assert kwargs["num_workers"] == result.best.num_workers and kwargs["batch_size"] == 8
    assert kwargs["prefetch_factor"] == result.best.prefetch_factor
    assert (result.best.sampler == "block") == isinstance(kwargs.get("sampler"), BlockShuffleSampler)
    assert f"the loader it measured: {result.best.make_loader_call('dataset', 8)}" in str(result)


def test_a_configuration_is_the_make_loader_call_it_names(encoded_pack):
    from labkit.datasets.pack_datasets import PackedDataset
    from labkit.workers.loader_factory import make_loader

    config = LoaderConfig("pil-reduced", num_workers=0, prefetch_factor=3, sampler="block")
    ds = PackedDataset(encoded_pack, "pil-reduced", 32)
    loader = make_loader(ds, **config.loader_kwargs(len(ds), 8))
    assert (loader.num_workers, loader.prefetch_factor, loader.batch_size) == (0, 3, 8)
    assert isinstance(loader.sampler, BlockShuffleSampler) and len(next(iter(loader))[0]) == 8
    assert config.make_loader_call("ds", 8) == (
        "make_loader(ds, batch_size=8, num_workers=0, prefetch_factor=3, "
        "sampler=BlockShuffleSampler.for_batches(len(ds), 8))"
    )


def test_threads_in_the_main_process_are_tried_for_the_decoders_that_release_the_gil_and_can_win():
    def model(config):  # no worker start-up, no batch crossing processes: the threads win here
        return (500.0 if config.num_workers == 0 else 200.0 * min(config.num_workers, 2)), 100 * MB

    result = search(
        model,
        ["pil", "simplejpeg"],
        max_workers=4,
        budget=Budget(2**34, 2**34),
        batch_bytes=BATCH,
        threaded=["simplejpeg"],
    )
    assert result.best == LoaderConfig("simplejpeg", 0, 2)
    assert min(t.config.num_workers for t in result.trials if t.config.decoder == "pil") == 1
    assert "no worker processes (the main process decodes with a thread per core" in str(result)
    # the table's num_workers column holds the number; where the decoding ran is a column of its own
    row = next(line for line in str(result).splitlines() if line.startswith("simplejpeg") and " chosen" in line)
    assert row.split()[1:3] == ["0", "main"] and "main threads" in str(result).splitlines()[0]


def test_without_decoding_the_main_process_alone_is_tried_and_can_win():
    def model(config):  # reading decoded arrays: shipping them from workers costs more than it saves
        return (1000.0 if config.num_workers == 0 else 800.0), 100 * MB

    result = search(model, [NO_DECODE], max_workers=4, budget=Budget(2**34, 2**34), batch_bytes=BATCH)
    assert result.best.num_workers == 0 and all(t.config.num_workers <= 1 for t in result.trials)


def test_main_threads_are_tried_on_the_winner_only():
    calls = []

    def model(config):
        calls.append(config)
        return (200.0 if config.main_threads == 1 else 150.0) * min(config.num_workers, 2), 100 * MB

    result = search(model, ["pil"], max_workers=4, budget=Budget(2**34, 2**34), batch_bytes=BATCH, main_threads=[1])
    assert result.best.main_threads == 1 and sum(c.main_threads == 1 for c in calls) == 1


def test_batch_layout_is_tried_on_the_winner_and_kept_only_if_faster():
    for block_rate, expected in ((260.0, "block"), (190.0, "random")):
        calls = []

        def model(config, block_rate=block_rate, calls=calls):
            calls.append(config)
            return (block_rate if config.sampler == "block" else 200.0) * min(config.num_workers, 1), 100 * MB

        result = search(
            model, ["pil"], max_workers=3, budget=Budget(2**34, 2**34), batch_bytes=BATCH, samplers=["block"]
        )
        assert result.best.sampler == expected
        blocks = [c for c in calls if c.sampler == "block"]
        assert len(blocks) == 1 and blocks[0].num_workers == 1  # only on the winner (1 worker: a 2nd gained nothing)
        assert f"{expected} batches" in str(result)
