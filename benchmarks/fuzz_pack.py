#!/usr/bin/env python3
"""Fuzz the pack reader for a fixed time: every damaged pack must give back its bytes or a named PackError.

The long run of the quick fuzz in ``tests/storage/test_pack_format.py``, with the same mutations and the
same promise (`labkit.tools.pack_fuzzer`): truncations, flipped bytes, and index records or header
fields edited and re-signed, applied to a small valid pack. Engines: hypothesis (random
search, shrinking whatever it finds to a minimal example) and, where ``pip install atheris``
worked, atheris (coverage-guided: libFuzzer steers its input bytes toward new branches of
the reader, and they are decoded into the same mutations). The time is split between them.

It reports how many examples ran in how many seconds, the outcomes, every exception that is
not a named PackError (there must be none) and every example that ran past the per-example
limit (a hang).

    python benchmarks/fuzz_pack.py                       # 300 s
    python benchmarks/fuzz_pack.py --seconds 120 --json  # also writes benchmarks/results/fuzz_pack_<N>cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import struct
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

from labkit.core.timing import Stopwatch

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


class ExampleTimeout(BaseException):
    """Raised by the alarm in an example that ran past the limit (a BaseException, so no
    ``except Exception`` in the code under test can swallow it)."""


@dataclass
class Tally:
    """What one engine saw."""

    engine: str
    seconds: float = 0.0
    examples: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    broken_promises: list[dict[str, str]] = field(default_factory=list)
    hangs: list[dict[str, str]] = field(default_factory=list)
    failures: int = 0  # broken promises and hangs, each time one happened
    slowest_example_s: float = 0.0
    note: str = ""

    def run(self, mutation: Any, path: str, limit: float | None) -> None:
        """Damage the sample pack at ``path`` with ``mutation`` and check the reader's promise; past ``limit``
        seconds raise `ExampleTimeout` (``None``: the caller watches the time)."""
        from labkit.tools import pack_fuzzer

        self.examples += 1
        watch = Stopwatch()
        if limit:
            signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            outcome = pack_fuzzer.check_promise(pack_fuzzer.damaged_copy(path, mutation))
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        except ExampleTimeout:
            self.record(self.hangs, repr(mutation), f"ran past {limit:g} s")
            raise
        finally:
            if limit:
                signal.setitimer(signal.ITIMER_REAL, 0)
            self.slowest_example_s = max(self.slowest_example_s, watch.elapsed)

    def record(self, found: list[dict[str, str]], mutation: str, what: str) -> None:
        """Add a failure to ``found`` (the first 20 distinct ones are kept; all are counted)."""
        self.failures += 1
        entry = {"mutation": mutation, "error": what}
        if entry not in found and len(found) < 20:
            found.append(entry)


def _alarm(signum: int, frame: Any) -> None:
    raise ExampleTimeout()


def run_hypothesis(seconds: float, limit: float, workdir: str) -> Tally:
    """Batches of random mutations until ``seconds`` have passed; a failure is shrunk, recorded, and the search
    goes on."""
    from hypothesis import HealthCheck, given, settings

    from labkit.tools import pack_fuzzer

    tally = Tally("hypothesis")
    path = os.path.join(workdir, "hypothesis.pack")

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(pack_fuzzer.any_mutation())
    def batch(mutation: Any) -> None:
        tally.run(mutation, path, limit)

    start = Stopwatch()
    while start.elapsed < seconds:
        try:
            batch()
        except pack_fuzzer.BrokenPromise as e:  # hypothesis has shrunk it; its note names the smallest example
            example = " ".join(n for n in getattr(e, "__notes__", []) if "Falsifying" in n or "mutation=" in n)
            tally.record(tally.broken_promises, example or "(not shown)", str(e))
        except ExampleTimeout:
            pass  # recorded by the tally with its mutation; hypothesis does not shrink a BaseException
    tally.seconds = start.elapsed
    return tally


def _mutation_from(data: bytes) -> Any:
    """Decode libFuzzer's input bytes into one of packfuzz's mutations."""
    import atheris

    from labkit.tools import pack_fuzzer

    fdp = atheris.FuzzedDataProvider(data)
    size = len(pack_fuzzer.sample_pack_bytes())
    kind = fdp.ConsumeIntInRange(0, 4)
    if kind == 0:
        return pack_fuzzer.Mutation("truncate", (fdp.ConsumeIntInRange(0, size - 1),))
    if kind in (1, 2):
        pairs = tuple(
            (fdp.ConsumeIntInRange(0, size - 1), fdp.ConsumeIntInRange(1, 255))
            for _ in range(fdp.ConsumeIntInRange(1, 4))
        )
        return pack_fuzzer.Mutation("flip", pairs, resign=kind == 2)
    if kind == 3:
        index = fdp.ConsumeIntInRange(0, len(pack_fuzzer.SAMPLE_BLOBS) - 1)
        name = fdp.PickValueInList(list(pack_fuzzer.RECORD_FIELDS))
        fmt = pack_fuzzer.RECORD_FIELDS[name]
    else:
        name = fdp.PickValueInList(list(pack_fuzzer.HEADER_FIELDS))
        fmt = pack_fuzzer.HEADER_OFFSETS[name][1]
    nbytes = struct.calcsize(fmt)
    value = fdp.ConsumeInt(nbytes) if fmt[-1].islower() else fdp.ConsumeUInt(nbytes)
    if kind == 3:
        return pack_fuzzer.Mutation("record", (index, name, value), resign=True)
    return pack_fuzzer.Mutation("header", (name, value), resign=True)


def atheris_child(seconds: float, limit: float, workdir: str, out: str) -> None:
    """Runs in its own process: libFuzzer ends the run by exiting the process after ``seconds``, so the
    tally is written to ``out`` every half second."""
    import atheris

    with atheris.instrument_imports(include=["labkit"]):
        from labkit.core import string_table  # noqa: F401  (instrumented for coverage)
        from labkit.storage import pack_format  # noqa: F401  (instrumented for coverage)
        from labkit.tools import pack_fuzzer  # noqa: F401  (instrumented for coverage)
    tally = Tally("atheris")
    path = os.path.join(workdir, "atheris.pack")
    from labkit.core.atomic import write_json

    start, last_written = Stopwatch(), Stopwatch()

    def one(data: bytes) -> None:
        nonlocal last_written
        if last_written.elapsed >= 0.5:
            last_written = Stopwatch()
            tally.seconds = start.elapsed
            write_json(out, asdict(tally))
        mutation = _mutation_from(data)
        try:
            tally.run(mutation, path, None)  # libFuzzer's -timeout watches each example (it owns SIGALRM)
        except pack_fuzzer.BrokenPromise as e:
            tally.record(tally.broken_promises, repr(mutation), str(e))

    atheris.Setup(
        [
            sys.argv[0],
            f"-max_total_time={max(1, round(seconds))}",
            f"-timeout={math.ceil(limit)}",
            f"-artifact_prefix={workdir}/",
        ],
        one,
    )
    atheris.Fuzz()


def run_atheris(seconds: float, limit: float, workdir: str) -> Tally:
    out = os.path.join(workdir, "atheris.json")
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--atheris-child", str(seconds), str(limit), workdir, out],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
    )
    if proc.returncode == 0 and os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            data = json.load(f)
        return Tally(**data)
    # libFuzzer stopped the run early: an example past its -timeout, a crash, or an error in this harness.
    tally = Tally("atheris", seconds=seconds, note=f"libFuzzer stopped the run (exit code {proc.returncode})")
    tally.record(tally.hangs, "see libFuzzer's output", proc.stderr[-2000:])
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300, help="total fuzzing time, split between the engines")
    parser.add_argument(
        "--example-limit", type=float, default=2.0, help="seconds one example may take before it counts as a hang"
    )
    parser.add_argument("--engines", default=None, help="hypothesis,atheris (default: both where atheris imports)")
    parser.add_argument(
        "--json",
        nargs="?",
        const="",
        default=None,
        help="write the summary (default path benchmarks/results/fuzz_pack_<N>cpu.json)",
    )
    parser.add_argument(
        "--atheris-child", nargs=4, metavar=("SECONDS", "LIMIT", "WORKDIR", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.atheris_child:
        seconds, limit, workdir, out = args.atheris_child
        atheris_child(float(seconds), float(limit), workdir, out)
        return
    signal.signal(signal.SIGALRM, _alarm)
    from labkit.measure.result_files import result_path, write_result

    out = None if args.json is None else result_path("fuzz_pack", False, args.json, folder=RESULTS)
    try:
        import atheris  # noqa: F401  (only whether it is installed)

        have_atheris = True
    except ImportError:
        have_atheris = False
    engines = args.engines.split(",") if args.engines else ["hypothesis"] + (["atheris"] if have_atheris else [])
    if "atheris" in engines and not have_atheris:
        parser.error("atheris is not installed here: pip install atheris")
    share = args.seconds / len(engines)
    tallies = []
    with tempfile.TemporaryDirectory(prefix="labkit-fuzz-") as workdir:
        for engine in engines:
            print(f"{engine}: {share:.0f} s ...", flush=True)
            tallies.append(
                {"hypothesis": run_hypothesis, "atheris": run_atheris}[engine](share, args.example_limit, workdir)
            )

    from labkit.core.machine import describe_machine, machine_info

    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    if not have_atheris:
        print("atheris: not installed (pip install atheris), hypothesis only")
    for t in tallies:
        rate = t.examples / t.seconds if t.seconds else 0.0
        print(
            f"{t.engine}: {t.examples} examples in {t.seconds:.0f} s ({rate:.0f}/s), slowest example "
            f"{t.slowest_example_s * 1000:.1f} ms; {len(t.broken_promises)} broken promises and {len(t.hangs)} "
            f"hangs found ({t.failures} failing examples in all)" + (f"; {t.note}" if t.note else "")
        )
        print("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(t.outcomes.items(), key=lambda kv: -kv[1])))
        for found in t.broken_promises + t.hangs:
            print(f"  {found['mutation']}: {found['error']}")
    failed = any(t.broken_promises or t.hangs for t in tallies)
    if out is not None:
        write_result(
            out,
            {
                "machine": info,
                "settings": {"seconds": args.seconds, "example_limit_s": args.example_limit, "engines": engines},
                "engines": [asdict(t) for t in tallies],
                "promise_kept": not failed,
            },
        )
        print(f"wrote {out}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
