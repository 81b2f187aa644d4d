#!/usr/bin/env python3
"""A validation loader beside the training loader in one process: should its workers stay alive between passes?

The choice `make_loader` makes for a second loader (the same CPU budget as the first, persistent workers), measured:
epochs of (a training pass, a validation pass) with the validation loader's workers persistent or started anew
for each pass, alternating, the median of the rounds. Three figures decide it: how much longer a validation pass
takes when its workers start anew, whether idle validation workers slow the training pass beside them (they
should not: the loaders take turns), and the memory the idle workers hold (PSS, so pages shared with the main
process count once).

    python benchmarks/second_loader.py                   # the kit's photos, made if missing
    LABKIT_QUICK=1 python benchmarks/second_loader.py --rounds 2
"""

from __future__ import annotations

import argparse
import multiprocessing
from statistics import median

import torch

from labkit.core.cpus import cpu_budget
from labkit.core.environment import quick_mode
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import Stopwatch
from labkit.core.wording import count
from labkit.datasets.pack_datasets import PackedDataset
from labkit.decode.center_crop import CenterCrop
from labkit.decode.random_crop import RandomResizedCrop
from labkit.harness.workspace import prepare
from labkit.measure.process_memory import tree_memory_bytes, tree_memory_measure
from labkit.measure.result_files import result_path, write_result
from labkit.workers.loader_factory import make_loader

SIZE = 128


def one_setting(pack: str, persistent: bool, epochs: int, batch: int, method: str | None) -> dict[str, float]:
    """Median training-pass and validation-pass seconds, and the tree's memory in the middle of a training pass."""
    options = {"multiprocessing_context": method} if method else {}
    train = make_loader(PackedDataset(pack, crop=RandomResizedCrop(SIZE, seed=0)), batch_size=batch, seed=0, **options)
    val_set = torch.utils.data.Subset(
        PackedDataset(pack, crop=CenterCrop(SIZE, resize=SIZE)), range(0, len(PackedDataset(pack)), 4)
    )
    val = make_loader(val_set, batch_size=batch, shuffle=False, persistent_workers=persistent, **options)
    train_s: list[float] = []
    val_s: list[float] = []
    memory: list[int] = []
    for epoch in range(epochs + 1):  # the first epoch starts every loader's workers: left out
        clock = Stopwatch()
        for step, _ in enumerate(train):
            if step == len(train) // 2 and epoch:
                memory.append(tree_memory_bytes())
        train_s.append(clock.elapsed)
        clock = Stopwatch()
        for _ in val:
            pass
        val_s.append(clock.elapsed)
    return {
        "train_s": median(train_s[1:]),
        "val_s": median(val_s[1:]),
        "memory_bytes": median(memory),
        "workers": train.num_workers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of both settings; medians")
    parser.add_argument("--epochs", type=int, default=3, help="measured epochs per setting and round")
    parser.add_argument(
        "--start-method",
        default=None,
        choices=["fork", "spawn", "forkserver"],
        help="how workers start (default: this OS's; spawn is macOS's and Windows')",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    name = "second_loader" + (f"_{args.start_method}" if args.start_method else "")
    out = result_path(name, quick, args.json)
    ws = prepare(args.data, quick=quick, progress=False)
    batch = 32
    settings = {"persistent": True, "started anew": False}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
    for round_ in range(args.rounds):
        for name, persistent in settings.items():
            run = one_setting(ws.pack, persistent, args.epochs, batch, args.start_method)
            runs[name].append(run)
            print(
                f"round {round_ + 1}/{args.rounds}: validation workers {name:<12}: training pass "
                f"{run['train_s']:.3f} s, validation pass {run['val_s']:.3f} s, "
                f"{run['memory_bytes'] / 2**20:.0f} MiB",
                flush=True,
            )
    kept, anew = (runs[name] for name in settings)
    val_ratio = [a["val_s"] / k["val_s"] for k, a in zip(kept, anew)]
    train_ratio = [k["train_s"] / a["train_s"] for k, a in zip(kept, anew)]
    held = [(k["memory_bytes"] - a["memory_bytes"]) / 2**20 for k, a in zip(kept, anew)]
    info = machine_info()
    budget = cpu_budget()
    print(
        f"Machine: {describe_machine(info)}; {ws.count} images, batch {batch}, {SIZE}x{SIZE} crops, "
        f"{count(kept[0]['workers'], 'worker')} for each loader, started by "
        f"{args.start_method or multiprocessing.get_start_method()} ({budget.reasoning})"
    )
    print(
        f"  validation pass, workers started anew / persistent: median {median(val_ratio):.2f}x "
        f"({', '.join(f'{r:.2f}' for r in val_ratio)})"
    )
    print(
        f"  training pass beside idle persistent validation workers / beside none: median "
        f"{median(train_ratio):.2f}x ({', '.join(f'{r:.2f}' for r in train_ratio)})"
    )
    print(
        f"  memory the idle validation workers hold ({tree_memory_measure()}): median {median(held):.0f} MiB "
        f"({', '.join(f'{m:.0f}' for m in held)})"
    )
    write_result(
        out,
        {
            "machine": info,
            "start_method": args.start_method or multiprocessing.get_start_method(),
            "images": ws.count,
            "batch_size": batch,
            "size": SIZE,
            "runs": runs,
            "val_anew_over_persistent": val_ratio,
            "train_beside_idle_over_alone": train_ratio,
            "idle_val_workers_mib": held,
            "memory_measure": tree_memory_measure(),
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
