#!/usr/bin/env python3
"""How labkit's costs grow with the data set: packing, other stores, opening, workers' memory, cold storage.

Every series runs over data sets of N small photo-like images (64x64, a few KB each, made by
`labkit.harness.synthetic_data.make_photos` under the data folder, kept between runs) and is drawn on a log-log
plot with its slope: 1.0 is a cost that grows as the data does, more is a cost that grows faster.

* packing: `labkit pack` (encoded, and decoded) against WebDataset's ``ShardWriter`` and MosaicML
  Streaming's ``MDSWriter``, each run in the same number of processes on the same files;
* other stores: raw reads (no decode) of the same files from the folder, the pack, LMDB and HDF5, in
  random and block-shuffled order, warm and cold;
* opening: the time and main-process RSS to build ``ImageFolderDataset``, ``PackedDataset`` and
  ``DecodedArrayDataset``, per 1,000 samples;
* workers' memory: each of 2 workers' RSS over an epoch, labkit's numpy-backed storage against the
  same paths and labels in Python lists (the copy-on-write trap);
* cold storage: the ablation's v2, v3 and v6 on photo-sized images (800x600), warm and with the page
  cache emptied before each (the run says how), the disk's sequential read rate, and block-shuffled
  against random batches on the cold decoded pack.

A missing peer (the ``peers`` extra: webdataset, mosaicml-streaming, lmdb, h5py) is named and its
column skipped.

    python benchmarks/scale.py            # N = 2,000, 20,000, 200,000; the seed's 20,000 photos cold: tens of minutes
    python benchmarks/scale.py --quick    # N = 250, 750, 2,000; the course's 256 photos: under 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import multiprocessing as mp
import os
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from labkit.core.environment import usable_cpus
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import Stopwatch
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.decode.pil_decoders import check_decodable
from labkit.diagnose.soak import trace_worker_memory
from labkit.harness.ablation import measure_version
from labkit.harness.ablation_versions import VERSIONS, AblationSettings
from labkit.harness.naive_datasets import NaivePathListDataset, PathTableDataset
from labkit.harness.synthetic_data import PhotoSpec, make_photos
from labkit.harness.workspace import OUTPUT_SIZE, Workspace, course_workspace, data_root, prepare
from labkit.measure.page_cache import empty_page_cache, resident_share
from labkit.measure.process_memory import rss_bytes
from labkit.measure.result_files import result_path, write_result
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.storage.image_folder import scan_image_folder
from labkit.storage.pack_format import PackReader
from labkit.storage.packing import pack_folder, read_file

SMALL = 64
FULL_SIZES = (2_000, 20_000, 200_000)
QUICK_SIZES = (250, 750, 2_000)
SEED_COUNT = 20_000  # the seed's data set: 20,000 photos of about 200 KB
BATCH = 64
STEPS = ("packing", "opening", "stores", "workers_memory", "cold_storage")
PEERS = {"webdataset": "webdataset", "mosaicml-streaming": "streaming", "lmdb": "lmdb", "h5py": "h5py"}


def available_peers() -> dict[str, str]:
    """Each peer package: "ok", or why it cannot run here."""
    found = {}
    for name, module in PEERS.items():
        try:
            importlib.import_module(module)
            found[name] = "ok"
        except Exception as e:  # an ImportError, or a package broken by its own dependencies
            found[name] = f'not usable ({type(e).__name__}: {e}); pip install -e ".[peers]"'
    return found


def log_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Slope of log(y) against log(x): 1.0 grows as the data does."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def small_folder(n: int) -> str:
    """N 64x64 photo-like JPEGs under the data folder, made once and reused."""
    folder = os.path.join(data_root(), f"scale-{n}-{SMALL}px")
    manifest = os.path.join(folder, "labkit_manifest.json")
    if not os.path.exists(manifest) or json.load(open(manifest))["spec"]["n"] != n:
        print(f"[data] making {n} images of {SMALL}x{SMALL} in {os.path.relpath(folder)}")
        make_photos(folder, PhotoSpec(n=n, width=SMALL, height=SMALL), progress=False)
    return folder


def _files(folder: str) -> tuple[list[str], np.ndarray]:
    index = scan_image_folder(folder)
    return [index.abspath(i) for i in range(len(index))], index.labels


# -- packing ----------------------------------------------------------------------------------------------


def _wds_share(job: tuple[str, int, list[str], list[int]]) -> None:
    import webdataset as wds

    out, part, paths, labels = job
    with wds.ShardWriter(os.path.join(out, f"part{part}-%05d.tar"), maxcount=10_000, verbose=0) as sink:
        for k, (path, label) in enumerate(zip(paths, labels)):
            with open(path, "rb") as f:
                sink.write({"__key__": f"{part}-{k:08d}", "jpg": f.read(), "cls": label})


def _mds_share(job: tuple[str, int, list[str], list[int]]) -> None:
    from streaming import MDSWriter

    out, part, paths, labels = job
    with MDSWriter(out=os.path.join(out, f"part{part}"), columns={"image": "bytes", "label": "int"}) as writer:
        for path, label in zip(paths, labels):
            with open(path, "rb") as f:
                writer.write({"image": f.read(), "label": label})


def _write_in_parallel(share: Callable, folder: str, out: str, workers: int) -> None:
    """A peer writer run in ``workers`` processes, each over its contiguous share of the files."""
    paths, labels = _files(folder)
    cut = np.linspace(0, len(paths), workers + 1).astype(int)
    jobs = [(out, p, paths[a:b], [int(x) for x in labels[a:b]]) for p, (a, b) in enumerate(zip(cut, cut[1:]))]
    with mp.get_context("fork").Pool(workers) as pool:
        pool.map(share, jobs)


def per_file_costs(folder: str, files: int = 2_000) -> dict[str, float]:
    """Median microseconds, on one core, to read a file and to check it as `labkit pack` does: what
    bounds the checked pack, whatever the writer around it does."""
    paths = [os.fsencode(p) for p in _files(folder)[0][:files]]
    blobs = [read_file(p) for p in paths]  # warm
    costs = {}
    for name, step in (("read", lambda k: read_file(paths[k])), ("check", lambda k: check_decodable(blobs[k]))):
        times = []
        for k in range(len(paths)):
            watch = Stopwatch()
            step(k)
            times.append(watch.elapsed)
        costs[name] = statistics.median(times) * 1e6
    return costs


def packing(sizes: Sequence[int], workers: int, peers: dict[str, str], scratch: str) -> dict[str, Any]:
    """Seconds, files/s and MB/s of each writer at each N (source bytes: the JPEG files, read once just
    before each writer so that every writer finds them in the page cache)."""
    writers: dict[str, Callable[[str, str], None]] = {
        "labkit pack": lambda folder, out: pack_folder(folder, out, workers=workers, progress=False),
        # what the peers do: copy the bytes, decode nothing (`labkit pack` test-decodes every file by default)
        "labkit pack --no-check": lambda folder, out: pack_folder(
            folder, out, check=False, workers=workers, progress=False
        ),
        "labkit pack --decoded": lambda folder, out: pack_folder(
            folder, out, decoded_size=SMALL, workers=workers, progress=False
        ),
    }
    if peers["webdataset"] == "ok":
        writers["webdataset ShardWriter"] = lambda folder, out: _write_in_parallel(_wds_share, folder, out, workers)
    if peers["mosaicml-streaming"] == "ok":
        writers["mosaicml MDSWriter"] = lambda folder, out: _write_in_parallel(_mds_share, folder, out, workers)
    result: dict[str, Any] = {
        "sizes": list(sizes),
        "source_mb": [],
        "writers": {w: {"s": [], "out_mb": []} for w in writers},
    }
    for n in sizes:
        folder = small_folder(n)
        paths, _ = _files(folder)
        result["source_mb"].append(sum(os.path.getsize(p) for p in paths) / 1e6)
        for name, write in writers.items():
            out = os.path.join(scratch, name.replace(" ", "_").replace("-", ""))
            shutil.rmtree(out, ignore_errors=True)
            if not name.startswith("labkit"):
                os.makedirs(out)
            target = out + ".pack" if name.startswith("labkit") else out
            for path in paths:  # every writer starts with the files in the page cache: warm, stated
                read_file(os.fsencode(path))
            gc.collect()
            watch = Stopwatch()
            write(folder, target)
            seconds = watch.elapsed
            size = (
                os.path.getsize(target)
                if os.path.isfile(target)
                else sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target) for f in fs)
            )
            result["writers"][name]["s"].append(seconds)
            result["writers"][name]["out_mb"].append(size / 1e6)
            if os.path.isfile(target):
                os.remove(target)
            else:
                shutil.rmtree(target)
    for w in result["writers"].values():
        w["files_per_s"] = [n / s for n, s in zip(sizes, w["s"])]
        w["mb_per_s"] = [mb / s for mb, s in zip(result["source_mb"], w["s"])]
        w["slope_time_vs_n"] = log_slope(sizes, w["s"])
        w["slope_time_vs_bytes"] = log_slope(result["source_mb"], w["s"])
    result["per_file_us"] = per_file_costs(small_folder(sizes[-1]))
    peers_rates = {k: v["files_per_s"][-1] for k, v in result["writers"].items() if not k.startswith("labkit")}
    if peers_rates:
        best = max(peers_rates, key=peers_rates.get)
        result["vs_faster_peer"] = {
            "peer": best,
            "goal": 1.5,
            "ratio_at_largest_n": {
                k: v["files_per_s"][-1] / peers_rates[best]
                for k, v in result["writers"].items()
                if k.startswith("labkit")
            },
        }
    return result


# -- other stores -----------------------------------------------------------------------------------------


def _write_lmdb(paths: list[str], out: str) -> str:
    import lmdb

    total = sum(os.path.getsize(p) for p in paths)
    env = lmdb.open(out, map_size=max(2 * total, 1 << 26), subdir=True, lock=False)
    with env.begin(write=True) as txn:
        for i, path in enumerate(paths):
            with open(path, "rb") as f:
                txn.put(b"%09d" % i, f.read())
    env.close()
    return out


def _write_h5(paths: list[str], out: str) -> str:
    import h5py

    with h5py.File(out, "w") as f:
        images = f.create_dataset("images", (len(paths),), dtype=h5py.vlen_dtype(np.uint8))
        for i, path in enumerate(paths):
            images[i] = np.fromfile(path, dtype=np.uint8)
    return out


Opener = Callable[[], tuple[Callable[[int], int], Callable[[], None]]]


def _stores(paths: list[str], pack: str, lmdb_dir: str | None, h5: str | None) -> dict[str, tuple[Opener, list[str]]]:
    """For each store: how to open it (giving a function that reads sample i's bytes and returns their
    length, and one that closes it) and the files it reads. Opened anew for every pass: a store read
    through mmap (the pack, LMDB) keeps the pages it mapped cached, so a cold pass needs a fresh mapping."""

    def folder() -> tuple[Callable[[int], int], Callable[[], None]]:
        def read(i: int) -> int:
            with open(paths[i], "rb") as f:
                return len(f.read())

        return read, lambda: None

    def packed() -> tuple[Callable[[int], int], Callable[[], None]]:
        reader = PackReader(pack, check_crc=False)
        return (lambda i: len(reader.read(i))), lambda: None

    stores = {"folder": (folder, paths), "labkit pack": (packed, [pack])}
    if lmdb_dir:

        def lmdb_store() -> tuple[Callable[[int], int], Callable[[], None]]:
            import lmdb

            env = lmdb.open(lmdb_dir, readonly=True, lock=False, readahead=False)
            txn = env.begin(buffers=True)
            return (lambda i: len(txn.get(b"%09d" % i))), lambda: (txn.abort(), env.close())

        stores["lmdb"] = (lmdb_store, [os.path.join(lmdb_dir, "data.mdb")])
    if h5:

        def h5_store() -> tuple[Callable[[int], int], Callable[[], None]]:
            import h5py

            f = h5py.File(h5, "r")
            images = f["images"]
            return (lambda i: len(images[i])), f.close

        stores["hdf5"] = (h5_store, [h5])
    return stores


def stores(n: int, peers: dict[str, str], scratch: str, max_reads: int, system_drop: bool) -> dict[str, Any]:
    """Raw reads per second of the same files from each store: random and block-shuffled order, warm and cold."""
    folder = small_folder(n)
    paths, _ = _files(folder)
    pack = os.path.join(scratch, "stores.pack")
    pack_folder(folder, pack, check=False, progress=False)
    lmdb_dir = _write_lmdb(paths, os.path.join(scratch, "stores.lmdb")) if peers["lmdb"] == "ok" else None
    h5 = _write_h5(paths, os.path.join(scratch, "stores.h5")) if peers["h5py"] == "ok" else None
    orders = {
        "random": np.random.default_rng(0).permutation(n)[:max_reads].tolist(),
        "block-shuffled": BlockShuffleSampler.for_batches(n, BATCH).order(0)[:max_reads],
    }
    rates: dict[str, dict[str, float]] = {}
    resident: dict[str, dict[str, float | None]] = {}  # share of the store's bytes still cached after emptying
    how = ""
    for name, (open_store, files) in _stores(paths, pack, lmdb_dir, h5).items():
        for temperature in ("warm", "cold"):
            for order_name, order in orders.items():
                if temperature == "cold":
                    gc.collect()  # no mapping of the last pass left to keep its pages cached
                    how = empty_page_cache(files, system=system_drop)
                    resident.setdefault(name, {})[order_name] = resident_share(files)
                read, close = open_store()
                if temperature == "warm":
                    for i in order:  # every sample read once before the timed pass
                        read(i)
                watch = Stopwatch()
                for i in order:
                    read(i)
                rates.setdefault(name, {})[f"{order_name} {temperature}"] = len(order) / (watch.elapsed)
                close()
                del read, close  # the reader, and its mapping, go with them
    return {
        "n": n,
        "reads": len(orders["random"]),
        "images_per_s": rates,
        "cold_cache_emptied_by": how,
        "cold_resident_before": resident,
        "skipped": {k: v for k, v in peers.items() if k in ("lmdb", "h5py") and v != "ok"},
    }


# -- opening ----------------------------------------------------------------------------------------------


def _open_in_child(build: Callable[[], Any], pipe: Any) -> None:
    rss0, watch = rss_bytes(), Stopwatch()
    dataset = build()
    seconds = watch.elapsed
    pipe.send((seconds, (rss_bytes() - rss0) if rss0 is not None else float("nan"), len(dataset)))


def _open_once(build: Callable[[], Any]) -> tuple[float, float, int]:
    """Build a dataset in a fresh forked process: seconds and RSS added (nothing left from a previous build)."""
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_open_in_child, args=(build, there))
    child.start()
    answer = here.recv()
    child.join()
    return answer


def opening(sizes: Sequence[int], repeats: int) -> dict[str, Any]:
    """Time and main-process RSS to open each kind of dataset at each N (median of ``repeats``)."""
    result: dict[str, Any] = {"sizes": list(sizes), "datasets": {}}
    for n in sizes:
        folder = small_folder(n)
        pack, decoded = f"{folder}.pack", f"{folder}-decoded.pack"
        if not os.path.exists(pack):
            pack_folder(folder, pack, progress=False)
        if not os.path.exists(decoded):
            pack_folder(folder, decoded, decoded_size=SMALL, progress=False)
        kinds = {
            "ImageFolderDataset": lambda folder=folder: ImageFolderDataset(folder, "pil", SMALL),
            "PackedDataset": lambda pack=pack: PackedDataset(pack, "pil", SMALL),
            "DecodedArrayDataset": lambda decoded=decoded: DecodedArrayDataset(decoded),
        }
        for name, build in kinds.items():
            runs = [_open_once(build) for _ in range(repeats)]
            entry = result["datasets"].setdefault(name, {"s": [], "rss_mb": []})
            entry["s"].append(statistics.median(r[0] for r in runs))
            entry["rss_mb"].append(statistics.median(r[1] for r in runs) / 2**20)
    for entry in result["datasets"].values():
        entry["ms_per_1000"] = [s * 1000 / n * 1000 for s, n in zip(entry["s"], sizes)]
        entry["rss_mb_per_1000"] = [mb / n * 1000 for mb, n in zip(entry["rss_mb"], sizes)]
        entry["slope_time"] = log_slope(sizes, entry["s"])
        # RSS added can be ~0 for a small index: clamp to a page so the log stays defined
        entry["slope_rss"] = log_slope(sizes, [max(mb, 4 / 1024) for mb in entry["rss_mb"]])
    return result


# -- workers' memory --------------------------------------------------------------------------------------


def workers_memory(n: int) -> dict[str, Any]:
    """Each worker's RSS (and private memory) over one epoch with 2 workers, per storage of the same index."""
    folder = small_folder(n)
    index = scan_image_folder(folder)
    paths = [index.relpaths[i] for i in range(len(index))]
    decoded = f"{folder}-decoded.pack"
    datasets = {
        "labkit DecodedArrayDataset": lambda: DecodedArrayDataset(decoded),
        "labkit PathTableDataset (numpy)": lambda: PathTableDataset(paths, index.labels),
        "NaivePathListDataset (Python lists)": lambda: NaivePathListDataset(paths, index.labels.tolist()),
    }
    result = {}
    for name, build in datasets.items():
        trace = trace_worker_memory(
            build(), epochs=1, readings_per_epoch=4, batch_size=250, num_workers=2, progress=False
        )
        rss = trace.mib("rss")
        anonymous = trace.growth_mib("anonymous")
        result[name] = {
            "epochs": trace.epochs,
            "rss_mib": {w: v.tolist() for w, v in rss.items()},
            "private_mib": {w: v.tolist() for w, v in trace.mib("private").items()},
            "anonymous_mib": {w: v.tolist() for w, v in trace.mib("anonymous").items()},
            "rss_growth_pct": {w: float(100 * (v[-1] / v[0] - 1)) for w, v in rss.items()},
            "private_growth_mib": trace.growth_mib("private"),
            # the goal's measure: what a leak or copy-on-write grows, against the worker's start
            "anonymous_growth_pct": {
                w: None if anonymous[w] is None else float(100 * anonymous[w] / rss[w][0]) for w in rss
            },
        }
    return {"n": n, "workers": 2, "datasets": result, "goal_pct": 5.0}


# -- cold storage -----------------------------------------------------------------------------------------


def _seed_workspace(quick: bool) -> Workspace:
    if quick:
        return course_workspace(quick=True, progress=False)
    folder = os.path.join(data_root(), f"photos-{SEED_COUNT}")
    if not os.path.isdir(folder):
        make_photos(folder, PhotoSpec(n=SEED_COUNT), progress=False)
    return prepare(folder, quick=False, progress=False, recheck=False)


def sequential_read_mb_s(path: str, system_drop: bool, limit: int = 2 << 30) -> float:
    """The disk's sequential read rate: the file read cold, front to back, in 16 MiB reads."""
    empty_page_cache([path], system=system_drop)
    done, watch = 0, Stopwatch()
    with open(path, "rb", buffering=0) as f:
        while done < limit:
            chunk = f.read(16 << 20)
            if not chunk:
                break
            done += len(chunk)
    return done / 1e6 / (watch.elapsed)


def batch_orders_cold(decoded_pack: str, system_drop: bool, max_batches: int) -> dict[str, float]:
    """images/s of batched reads from the cold decoded pack: random batches against block-shuffled ones."""
    n = len(PackReader(decoded_pack, check_crc=False))
    orders = {
        "random batches": np.random.default_rng(0).permutation(n).tolist(),
        "block-shuffled batches": BlockShuffleSampler.for_batches(n, BATCH).order(0),
    }
    rates = {}
    for name, order in orders.items():
        dataset = DecodedArrayDataset(decoded_pack, check_crc=False)
        empty_page_cache([decoded_pack], system=system_drop)
        batches = [order[k : k + BATCH] for k in range(0, len(order), BATCH)][:max_batches]
        watch = Stopwatch()
        for batch in batches:
            dataset.__getitems__(batch)
        rates[name] = sum(map(len, batches)) / (watch.elapsed)
        del dataset
        gc.collect()
    return rates


def cold_storage(quick: bool, system_drop: bool) -> dict[str, Any]:
    """The ablation's v2, v3, v6 warm and cold on photo-sized images; disk rate; v6 cold as a share of it."""
    ws = _seed_workspace(quick)
    versions = {v.id: v for v in VERSIONS}
    out: dict[str, Any] = {"images": ws.count, "folder": os.path.relpath(ws.folder, data_root()), "versions": {}}
    index = scan_image_folder(ws.folder)
    data = {
        "v2": [os.fsencode(index.abspath(i)) for i in range(len(index))],
        "v3": [os.fsencode(ws.pack)],
        "v6": [os.fsencode(ws.decoded_pack)],
    }
    for cold in (False, True):
        settings = AblationSettings(
            batch_size=BATCH,
            num_workers=2,
            runs=3,
            steps=3 if quick else 20,
            min_seconds=0.0 if quick else 3.0,
            cold=cold,
            device="cpu",
        )
        for vid in ("v2", "v3", "v6"):
            gc.collect()
            if not cold:  # warm means read just before: a kernel short of memory drops pages of data read long ago
                for path in data[vid]:
                    read_file(path)
            r = measure_version(versions[vid], ws, settings, versions[vid].decoder)
            out["versions"].setdefault(vid, {})["cold" if cold else "warm"] = {
                "images_per_s": r.images_per_s,
                "step_s": r.step_s,
                "cache": r.cache,
            }
    image_bytes = 3 * OUTPUT_SIZE * OUTPUT_SIZE
    out["disk_sequential_mb_s"] = sequential_read_mb_s(ws.decoded_pack, system_drop)
    v6_cold_mb_s = out["versions"]["v6"]["cold"]["images_per_s"] * image_bytes / 1e6
    out["v6_cold_mb_s"] = v6_cold_mb_s
    out["v6_cold_share_of_disk"] = v6_cold_mb_s / out["disk_sequential_mb_s"]
    out["v3_over_v2"] = {
        t: out["versions"]["v3"][t]["images_per_s"] / out["versions"]["v2"][t]["images_per_s"] for t in ("warm", "cold")
    }
    out["cold_batches_images_per_s"] = batch_orders_cold(ws.decoded_pack, system_drop, 20 if quick else 200)
    return out


def cold_storage_record(result: dict[str, Any], note: str) -> dict[str, Any]:
    """One cold-storage run in a line of the history (``cold_storage_runs``): the cold verdicts move between runs
    on a shared machine, so every run is kept beside the one the report quotes."""
    versions = result["versions"]
    return {
        "note": note,
        "v3_over_v2": result["v3_over_v2"],
        "v6_cold_share_of_disk": result["v6_cold_share_of_disk"],
        "images_per_s": {v: {t: d[t]["images_per_s"] for t in ("warm", "cold")} for v, d in versions.items()},
        "warm_resident_before": {v: d["warm"]["cache"].get("resident_before") for v, d in versions.items()},
        "cold_batches_images_per_s": result["cold_batches_images_per_s"],
        "disk_sequential_mb_s": result["disk_sequential_mb_s"],
    }


# -- report -----------------------------------------------------------------------------------------------


def plot(report: dict[str, Any], path: str, title: str) -> None:
    """Log-log panels of each cost against N (slope in the legend), and bars for the one-N measurements."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    pk, op = report["packing"], report["opening"]
    ax = axes[0][0]
    for name, w in pk["writers"].items():
        ax.loglog(pk["sizes"], w["s"], marker="o", label=f"{name} (slope {w['slope_time_vs_n']:.2f})")
    ax.set(title="packing: seconds", xlabel="samples N", ylabel="s")
    for ax, key, unit, slope in (
        (axes[0][1], "s", "opening: seconds", "slope_time"),
        (axes[0][2], "rss_mb", "opening: main-process RSS added, MB", "slope_rss"),
    ):
        for name, entry in op["datasets"].items():
            ax.loglog(
                op["sizes"], [max(v, 1e-3) for v in entry[key]], marker="o", label=f"{name} (slope {entry[slope]:.2f})"
            )
        ax.set(title=unit, xlabel="samples N")
    st = report["stores"]
    ax = axes[1][0]
    columns = list(next(iter(st["images_per_s"].values())))
    for k, (store, rates) in enumerate(st["images_per_s"].items()):
        ax.bar(np.arange(len(columns)) + k * 0.2, [rates[c] for c in columns], 0.2, label=store)
    ax.set_xticks(np.arange(len(columns)) + 0.3, columns, fontsize=7)
    ax.set(title=f"raw reads, {st['n']} files of {SMALL}x{SMALL}", ylabel="images/s", yscale="log")
    wm = report["workers_memory"]
    ax = axes[1][1]
    for name, d in wm["datasets"].items():
        for w, values in d["anonymous_mib"].items():
            ax.plot(d["epochs"], values, marker=".", label=f"{name} {w}")
    ax.set(title=f"workers' unique anonymous memory over an epoch, N={wm['n']}", xlabel="epoch", ylabel="MiB")
    cs = report["cold_storage"]
    ax = axes[1][2]
    vids = list(cs["versions"])
    for k, t in enumerate(("warm", "cold")):
        ax.bar(np.arange(len(vids)) + k * 0.4, [cs["versions"][v][t]["images_per_s"] for v in vids], 0.4, label=t)
    ax.set_xticks(np.arange(len(vids)) + 0.2, vids)
    ax.set(title=f"ablation, {cs['images']} photos: warm and cold", ylabel="images/s", yscale="log")
    for ax in axes.flat:
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _share(value: float | None) -> str:
    """A page-cache share read by `resident_share`: ``None`` (or -1 in results saved before) is not known."""
    return "not known" if value is None or value < 0 else f"{value:.1%}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f} %"


def summary(report: dict[str, Any]) -> list[str]:
    """The lines a reader needs: each goal, what was measured against it."""
    lines = []
    pk = report["packing"]
    for name, w in pk["writers"].items():
        lines.append(
            f"pack  {name:<24} "
            + "  ".join(
                f"N={n}: {f:,.0f} files/s {m:.1f} MB/s" for n, f, m in zip(pk["sizes"], w["files_per_s"], w["mb_per_s"])
            )
            + f"  (time vs bytes slope {w['slope_time_vs_bytes']:.2f})"
        )
    if "vs_faster_peer" in pk:
        v = pk["vs_faster_peer"]
        lines.append(
            f"pack  / {v['peer']} at N={pk['sizes'][-1]}: "
            + ", ".join(f"{k} {r:.2f}x" for k, r in v["ratio_at_largest_n"].items())
            + f" (goal >= {v['goal']}x)"
        )
    if "per_file_us" in pk:
        c = pk["per_file_us"]
        lines.append(
            f"pack  one core, per file: read {c['read']:.0f} us, check {c['check']:.0f} us: the check alone "
            f"allows {report.get('workers', 1) * 1e6 / c['check']:,.0f} files/s on {report.get('workers', 1)} "
            "workers"
        )
    for name, e in report["opening"]["datasets"].items():
        lines.append(
            f"open  {name:<20} ms per 1,000: "
            + ", ".join(f"{x:.2f}" for x in e["ms_per_1000"])
            + "; RSS MB per 1,000: "
            + ", ".join(f"{x:.3f}" for x in e["rss_mb_per_1000"])
            + f"; slopes time {e['slope_time']:.2f}, RSS {e['slope_rss']:.2f} (goal <= 1.05)"
        )
    st = report["stores"]
    for store, rates in st["images_per_s"].items():
        lines.append(f"read  {store:<12} " + ", ".join(f"{k} {v:,.0f}/s" for k, v in rates.items()))
    lines.append(f"read  cold = {st['cold_cache_emptied_by']}")
    for name, d in report["workers_memory"]["datasets"].items():
        lines.append(
            f"mem   {name:<36} over the epoch, unique anonymous memory grew "
            + ", ".join(f"{w} {_pct(g)}" for w, g in d["anonymous_growth_pct"].items())
            + " of the start (goal < 5 %); RSS "
            + ", ".join(f"{w} {g:+.1f} %" for w, g in d["rss_growth_pct"].items())
        )
    lines.append(
        "mem   (RSS counts the pages of a mapped pack a worker has read: shared with the page cache and "
        "reclaimable, not a leak)"
    )
    cs = report["cold_storage"]
    for vid, d in cs["versions"].items():
        lines.append(
            f"cold  {vid}: warm {d['warm']['images_per_s']:.1f}, cold {d['cold']['images_per_s']:.1f} "
            f"images/s (data cached when it started: warm {_share(d['warm']['cache'].get('resident_before'))}, "
            f"cold {_share(d['cold']['cache'].get('resident_before'))}"
            + (
                f", kept cached by processes mapping it: {d['cold']['cache']['mapped_by_other_processes']}"
                if d["cold"]["cache"].get("mapped_by_other_processes")
                else ""
            )
            + ")"
        )
    lines.append(
        f"cold  v3/v2: warm {cs['v3_over_v2']['warm']:.2f}x, cold {cs['v3_over_v2']['cold']:.2f}x "
        f"(the seed: 1.35x on 20,000 photos from an SSD)"
    )
    lines.append(
        f"cold  disk sequential {cs['disk_sequential_mb_s']:.0f} MB/s; v6 cold {cs['v6_cold_mb_s']:.0f} MB/s "
        f"= {cs['v6_cold_share_of_disk']:.0%} of it (goal >= 80 %)"
    )
    lines.append(
        "cold  decoded pack, cold: "
        + ", ".join(f"{k} {v:,.0f} images/s" for k, v in cs["cold_batches_images_per_s"].items())
    )
    first = next(iter(cs["versions"].values()))["cold"]["cache"]
    lines.append(f"cold  cache emptied by: {first.get('emptied_by', '?')}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 250, 750, 2,000 and the course's 256 photos")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated steps to measure again into the existing "
        f"results, e.g. cold_storage (steps: {', '.join(STEPS)})",
    )
    parser.add_argument("--note", default="", help="a line on this run, kept with it in cold_storage_runs")
    args = parser.parse_args()
    quick = args.quick
    sizes = QUICK_SIZES if quick else FULL_SIZES
    system_drop = True  # as root: drop the whole page cache, as `labkit ablation --cold` does
    workers = usable_cpus()
    peers = available_peers()
    for name, state in peers.items():
        if state != "ok":
            print(f"[peers] {name} {state}: its column is skipped")
    scratch = os.path.join(data_root(), "scale-scratch")
    os.makedirs(scratch, exist_ok=True)
    info = machine_info()
    out = result_path("scale", quick, args.json)
    only = args.only.split(",") if args.only else list(STEPS)
    unknown = set(only) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; the steps are {', '.join(STEPS)}")
    watch = Stopwatch()
    report: dict[str, Any] = {
        "machine": info,
        "quick": quick,
        "sizes": list(sizes),
        "image": SMALL,
        "workers": workers,
        "peers": peers,
        "load_before": os.getloadavg(),
    }
    if args.only:  # the other steps' results as they were measured before
        if not os.path.exists(out):
            parser.error(f"--only measures again into {out}, which does not exist: run without --only first")
        with open(out, encoding="utf-8") as f:
            before = json.load(f)
        first_load = before.get("first_run_load", [before.get("load_before"), before.get("load_after")])
        report = {**before, "first_run_load": first_load, **{k: report[k] for k in ("machine", "peers", "load_before")}}
        report.setdefault("remeasured", {}).update({step: time.strftime("%Y-%m-%d") for step in only})
    steps: list[tuple[str, Callable[[], Any]]] = [  # in the order of STEPS
        ("packing", lambda: packing(sizes, workers, peers, scratch)),
        ("opening", lambda: opening(sizes, repeats=3)),
        ("stores", lambda: stores(sizes[1], peers, scratch, 2_000 if quick else 20_000, system_drop)),
        ("workers_memory", lambda: workers_memory(sizes[-1])),
        ("cold_storage", lambda: cold_storage(quick, system_drop)),
    ]
    for name, step in steps:
        if name not in only:
            continue
        step_watch = Stopwatch()
        report[name] = step()
        report.setdefault("seconds", {})[name] = step_watch.elapsed
        if name == "cold_storage":
            report.setdefault("cold_storage_runs", []).append(
                cold_storage_record(report[name], args.note or time.strftime("%Y-%m-%d %H:%M"))
            )
        print(f"[{name}] {report['seconds'][name]:.1f} s")
    shutil.rmtree(scratch, ignore_errors=True)
    report["load_after"] = os.getloadavg()
    report["total_s" if not args.only else f"total_s_{'_'.join(only)}"] = watch.elapsed
    report["summary"] = summary(report)
    print(
        f"Machine: {describe_machine(info)}; load average before {report['load_before'][0]:.2f}, "
        f"after {report['load_after'][0]:.2f}; {watch.elapsed:.0f} s in all"
    )
    print("\n".join(report["summary"]))
    write_result(out, report)
    png = os.path.splitext(out)[0] + ".png"
    plot(report, png, f"{describe_machine(info)} — {'quick' if quick else 'full'} run")
    print(f"wrote {os.path.relpath(out)} and {os.path.relpath(png)}")


if __name__ == "__main__":
    main()
