"""The ``labkit`` command: ``labkit data | pack | verify | demo | ablation | autotune | doctor | course | ddp-demo``.

Each sub-command is a thin shell over a library function, so anything it does a notebook
or a training script can do with one import. Every path named on the command line is checked before
any work starts; errors end in one line: exit 2 for bad input (a missing folder, an output that cannot
be written), 1 for a full disk or a damaged pack, 130 for Ctrl-C, with the temporary files removed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any

from labkit.core.disk_space import is_disk_full
from labkit.core.environment import quick_mode
from labkit.core.errors import LabkitError, LabkitFileNotFoundError, LabkitValueError
from labkit.core.user_paths import check_output_file, check_output_folder, require_folder
from labkit.core.wording import clipped, count


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 800x600, got {text!r}") from None
    return w, h


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text}")
    return value


def _cmd_data(args: argparse.Namespace) -> int:
    from labkit.harness.synthetic_data import QUICK_COUNT, ClipSpec, PhotoSpec, make_clips, make_photos
    from labkit.harness.workspace import data_root, kit_photos

    quick = args.quick or quick_mode()
    kind = "hostile" if args.hostile else "clips" if args.clips is not None else None
    if args.out:
        check_output_folder(args.out, "--out")
    else:  # the kit's own data folder, made as needed
        args.out = os.path.join(data_root(), kind) if kind else kit_photos(quick)
    if args.hostile:
        from labkit.core.string_table import printable
        from labkit.harness.synthetic_data import make_hostile

        for case in make_hostile(args.out, seed=args.seed):
            print(f"{case.expect:>8}  {clipped(printable(case.relpath), 60)}  ({case.what})")
        print(f"{args.out}: hostile inputs written; expectations in hostile_manifest.json")
        return 0
    if args.clips is not None:
        clips = args.clips
        width, height = args.size or (320, 240)
        spec = ClipSpec(
            n=clips,
            classes=args.classes,
            frames=args.frames,
            width=width,
            height=height,
            seed=args.seed,
            quality=args.quality,
        )
        print(make_clips(args.out, spec, workers=args.workers, progress=not args.no_progress))
        return 0
    n = args.n if args.n is not None else QUICK_COUNT if quick else PhotoSpec().n  # a number given wins over a mode
    width, height = args.size or (800, 600)
    spec = PhotoSpec(
        n=n,
        classes=args.classes,
        width=width,
        height=height,
        seed=args.seed,
        quality=args.quality,
        grayscale=args.grayscale,
        cmyk=args.cmyk,
        png=args.png,
        large=args.large,
        corrupt=args.corrupt,
    )
    if args.val and args.val < args.classes:  # before any image is made
        raise LabkitError(
            f"--val {args.val} with {args.classes} classes: a validation set needs an image of every "
            f"class, or its class folders (and so its labels) differ from the training set's; pass "
            f"--val {args.classes} or more"
        )
    print(make_photos(args.out, spec, workers=args.workers, progress=not args.no_progress))
    if args.val:
        held_out = dataclasses.replace(spec, n=args.val, seed=spec.seed + 1, corrupt=0.0)
        print(
            make_photos(args.out.rstrip(os.sep) + "-val", held_out, workers=args.workers, progress=not args.no_progress)
        )
    return 0


def _cmd_pack(args: argparse.Namespace) -> int:
    from labkit.storage.packing import pack_folder

    require_folder(args.src, "the source")
    check_output_file(args.dst, "the pack")
    report = pack_folder(
        args.src,
        args.dst,
        decoded_size=args.decoded,
        decoder=args.decoder,
        alignment=args.align,
        check=not args.no_check,
        workers=args.workers,
        progress=not args.no_progress,
    )
    print(report)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from labkit.storage.pack_format import PackError, verify_pack

    try:
        print(verify_pack(args.pack, progress=not args.no_progress))
    except PackError as e:
        print(f"DAMAGED {e}", file=sys.stderr)
        return 1
    return 0


def _ablation_settings(args: argparse.Namespace, quick: bool) -> Any:
    from labkit.harness.ablation_versions import AblationSettings

    return AblationSettings(
        batch_size=args.batch,
        num_workers=args.workers,
        runs=args.runs,
        steps=args.steps or (3 if quick else 20),
        min_seconds=0.0 if quick else 3.0,
        model=args.model or bool(args.accelerator),
        accelerator=args.accelerator,
        cold=args.cold,
        device=args.device,
    )


def _check_paths(args: argparse.Namespace) -> None:
    """Refuse, before any work, a ``--data`` that is not a folder and an output that cannot be written."""
    if args.data is not None:
        require_folder(args.data, "--data")
    for flag in ("json", "plot"):
        if getattr(args, flag, None):
            check_output_file(getattr(args, flag), f"--{flag}")
    if args.work:
        check_output_folder(args.work, "--work")
    if getattr(args, "accelerator", ""):
        from labkit.device.simulated_accelerator import accelerator

        accelerator(args.accelerator)  # an unknown name stops here, naming the known ones, before any data is made


def _cmd_ablation(args: argparse.Namespace) -> int:
    from labkit.harness.ablation import run_ablation
    from labkit.harness.workspace import prepare

    quick = args.quick or quick_mode()
    _check_paths(args)
    workspace = prepare(args.data, quick=quick, progress=not args.no_progress, work=args.work)
    only = args.only.split(",") if args.only else None
    json_path, plot_path = args.json, args.plot
    if args.command == "demo":  # the main job leaves its table and chart beside the packs
        stem = os.path.join(workspace.work, os.path.basename(os.path.abspath(workspace.folder)))
        json_path = json_path or f"{stem}-ablation.json"
        plot_path = plot_path or f"{stem}-ablation.png"
    run_ablation(
        workspace,
        _ablation_settings(args, quick),
        only=only,
        json_path=json_path,
        plot_path=plot_path,
        train=args.train,
        progress=not args.no_progress,
    )
    return 0


def _cmd_autotune(args: argparse.Namespace) -> int:
    from labkit.diagnose.autotuner import autotune, save_result
    from labkit.harness.workspace import prepare

    quick = args.quick or quick_mode()
    _check_paths(args)
    workspace = prepare(args.data, quick=quick, progress=not args.no_progress, work=args.work)
    result = autotune(
        workspace.pack,
        workspace.decoded_pack,
        batch_size=args.batch,
        max_workers=args.workers,
        min_seconds=0.0 if quick else 1.0,
    )
    print(result)
    if args.json:
        save_result(result, args.json)
        print(f"wrote {args.json}")
    return 0


def _image_shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CxHxW such as 3x256x256, got {text!r}") from None


def _cmd_doctor(args: argparse.Namespace) -> int:
    from labkit.core.cpus import cpu_budget
    from labkit.decode.registry import decoder_table
    from labkit.diagnose.doctor import LoaderPlan, diagnose, format_findings

    workers = args.workers if args.workers is not None else cpu_budget(ranks=args.ranks_per_node).workers_per_rank
    plan = LoaderPlan(
        num_workers=workers,
        prefetch_factor=args.prefetch,
        batch_size=args.batch,
        image=args.image,
        bytes_per_value=4 if args.float32 else 1,
        ranks_per_node=args.ranks_per_node,
        pin_memory=args.pin_memory,
        decode_threads=args.decode_threads,
    )
    print(format_findings(plan, diagnose(plan)))
    print("\ndecoders (labkit.decode.registry):\n  " + decoder_table().replace("\n", "\n  "))
    return 0


def _cmd_ddp_demo(args: argparse.Namespace) -> int:
    import subprocess

    from labkit.distributed.launch import torchrun_command, torchrun_env

    command = torchrun_command(
        "labkit.course.ddp_demo", ["--samples", args.samples, "--epochs", args.epochs], nproc=args.nproc
    )
    print(" ".join(command[2:]), flush=True)
    return subprocess.call(command, env=torchrun_env())


def _cmd_course(args: argparse.Namespace) -> int:
    from labkit.core.environment import clone_root
    from labkit.course.student_edition import write_student_edition
    from labkit.course.translation import TRANSLATIONS

    notebooks = args.notebooks or os.path.join(clone_root() or os.getcwd(), "notebooks")
    if not os.path.isdir(notebooks):
        raise LabkitFileNotFoundError(
            f"{notebooks}: no course notebooks there; run this from a clone of the project, or name them with "
            "--notebooks DIR"
        )
    if args.translate:
        return _course_translation(os.path.relpath(notebooks), args.translate, args.check, args.todo)
    if args.check or args.todo:
        raise LabkitValueError("--check and --todo go with --translate LANGUAGE (labkit course --translate zh --check)")
    check_output_folder(args.student)
    editions = write_student_edition(notebooks, args.student)
    names = sorted(n for n in os.listdir(notebooks) if n.endswith(".ipynb"))
    for name, edition in zip(names, editions):
        print(
            f"{name:<32} {count(edition.stubs, 'part'):>9} to write, {count(edition.graded, 'graded check'):>16} "
            f"({edition.points:g} point{'' if edition.points == 1 else 's'})"
        )
    translated = [
        language
        for language in sorted(os.listdir(notebooks))
        if os.path.isdir(os.path.join(notebooks, language, TRANSLATIONS))
    ]
    for language in translated:
        write_student_edition(
            os.path.join(notebooks, language), os.path.join(args.student, language), english=notebooks
        )
        print(f"{language}/: the same notebooks in that language")
    print(
        f"The student edition is in {args.student}: open it with `jupyter lab {args.student}` (the course's version "
        f"of each build is in {os.path.join(args.student, 'reference')}, for the notebooks to run on where a "
        "build is not written yet). To grade with nbgrader, run it with LABKIT_GRADING=1: a build left as a stub "
        "then scores nothing."
    )
    return 0


def _course_translation(notebooks: str, language: str, check: bool, todo: bool) -> int:
    """``labkit course --translate LANGUAGE``: build that edition of the course (or only check it, or mark in each
    translation file what is left to translate)."""
    from labkit.course.translation import build_edition, check_edition, write_todo

    if todo:
        for path, left, entries in write_todo(notebooks, language):
            print(f"{path}: {left} of {entries} entries to translate")
        return 0
    if not check:
        for name in build_edition(notebooks, language):
            print(f"wrote {os.path.join(notebooks, language, name)}")
    state = check_edition(notebooks, language)
    for problem in state.problems:
        print(problem)
    for name in state.out_of_date:
        print(f"{name}: the {language} notebook is not what its translation makes; build it (no --check)")
    if state.problems or state.out_of_date:
        print(
            f"{count(len(state.problems), 'cell')} to translate, {count(len(state.out_of_date), 'notebook')} to build"
        )
        return 1
    print(f"the {language} edition is complete and built")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workers", type=int, default=None, help="processes to use (default: every usable CPU)")
    common.add_argument("--no-progress", action="store_true", help="no progress bars")

    p = sub.add_parser("data", parents=[common], help="make the photo-like JPEG data set (ImageFolder layout)")
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default, in the kit's data folder, $LABKIT_DATA or "
        "the clone's data/: photos, photos-quick in quick mode, clips or hostile)",
    )
    p.add_argument(
        "--n", type=int, default=None, help="number of images (default 2000, 256 in quick mode; the article used 20000)"
    )
    p.add_argument("--classes", type=int, default=10)
    p.add_argument(
        "--val",
        type=int,
        default=0,
        metavar="N",
        help="also make a validation set of N other images of the same classes (seed + 1's) in OUT-val, "
        "e.g. data/photos-val beside data/photos",
    )
    p.add_argument("--size", type=_size, default=None, help="WIDTHxHEIGHT (default 800x600; 320x240 for clips)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    for variant, what in (
        ("grayscale", "grayscale JPEGs"),
        ("cmyk", "CMYK JPEGs"),
        ("png", "RGBA PNGs"),
        ("large", "4000x3000 JPEGs"),
        ("corrupt", "corrupt files (listed in the manifest)"),
    ):
        p.add_argument(f"--{variant}", type=_fraction, default=0.0, metavar="FRACTION", help=f"fraction of {what}")
    p.add_argument(
        "--clips",
        type=int,
        default=None,
        metavar="N",
        help="make N video-like clips (folders of JPEG frames) instead of photos",
    )
    p.add_argument("--frames", type=int, default=16, help="frames per clip (default 16)")
    p.add_argument(
        "--hostile",
        action="store_true",
        help="write awkward and broken inputs (truncated, HTML as .jpg, CMYK, 16-bit, bombs, "
        "EXIF, odd names, symlink loop...) with the expected outcome of each",
    )
    p.add_argument("--quick", action="store_true", help="make 256 images unless --n says (also: LABKIT_QUICK=1)")
    p.set_defaults(func=_cmd_data)

    p = sub.add_parser("pack", parents=[common], help="pack an ImageFolder into one verified file")
    p.add_argument("src", help="ImageFolder root (root/<class>/<image>)")
    p.add_argument("dst", help="pack file to write")
    p.add_argument("--decoded", type=int, metavar="SIZE", help="store SIZExSIZE decoded uint8 images instead of files")
    p.add_argument("--decoder", default="pil", help="decoder for --decoded (default pil)")
    p.add_argument("--align", type=int, default=None, help="align each sample to this many bytes")
    p.add_argument("--no-check", action="store_true", help="pack files without test-decoding them")
    p.set_defaults(func=_cmd_pack)

    p = sub.add_parser("verify", parents=[common], help="check a pack's header, index and every checksum")
    p.add_argument("pack")
    p.set_defaults(func=_cmd_verify)

    measuring = argparse.ArgumentParser(add_help=False)
    measuring.add_argument(
        "--data",
        default=None,
        help="an ImageFolder of yours (only read; it must exist); default: "
        "the kit's photo-like set, made on first use in its data folder",
    )
    measuring.add_argument(
        "--work",
        default=None,
        metavar="DIR",
        help="folder for the packs (and the demo's results) made from --data; default: beside "
        "the data inside the kit's data folder ($LABKIT_DATA or the clone's data/), else "
        "<that folder>/derived/<name>-<hash>",
    )
    measuring.add_argument("--batch", type=int, default=64)
    measuring.add_argument("--json", default=None, help="also write the results to this JSON file")
    measuring.add_argument("--quick", action="store_true", help="256 images, short runs (also: LABKIT_QUICK=1)")
    for name, what in (
        ("ablation", "the article's four versions and the ones beyond, measured here"),
        ("demo", "the main job: make, pack and verify the data, then the ablation"),
    ):
        p = sub.add_parser(name, parents=[common, measuring], help=what)
        p.add_argument("--runs", type=int, default=3, help="measured runs per version (median)")
        p.add_argument("--steps", type=int, default=None, help="batches per run (default 20; 3 in quick mode)")
        p.add_argument("--model", action="store_true", help="add a training step (small CNN on CPU, ResNet-50 on GPU)")
        p.add_argument(
            "--accelerator",
            default="",
            help="with the model step, a simulated GPU instead of a real model: a100, a100-tf32, v100 or v100-fp32 "
            "(its published ResNet-50 training rate; the step waits that long without using a core)",
        )
        p.add_argument("--cold", action="store_true", help="drop the data's page cache before each version")
        p.add_argument("--only", default=None, help="comma-separated version ids, e.g. v1,v5,v6 (t1,t5 with --train)")
        p.add_argument(
            "--train",
            action="store_true",
            help="the training versions: RandomResizedCrop(224) + flip, after a full decode (t1-t3) or inside it (t5)",
        )
        p.add_argument("--plot", default=None, help="write a bar chart PNG here")
        p.add_argument("--device", default="", help="cpu or cuda (default: cuda when available)")
        p.set_defaults(func=_cmd_ablation)

    p = sub.add_parser(
        "autotune",
        parents=[common, measuring],
        help="pick num_workers, prefetch_factor and decoder by measuring, under a memory budget",
    )
    p.set_defaults(func=_cmd_autotune)

    p = sub.add_parser("doctor", help="check a loader configuration against this machine (/dev/shm, CPUs, threads)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="num_workers per rank (default: make_loader's, this node's CPUs shared by --ranks-per-node)",
    )
    p.add_argument("--prefetch", type=int, default=2, help="prefetch_factor (default 2)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image", type=_image_shape, default=(3, 256, 256), help="CxHxW of one sample (default 3x256x256)")
    p.add_argument("--float32", action="store_true", help="samples cross processes as float32, not uint8")
    p.add_argument("--ranks-per-node", type=int, default=1, help="training processes (GPUs) per node")
    p.add_argument("--pin-memory", action="store_true")
    p.add_argument(
        "--decode-threads",
        type=int,
        default=None,
        help="threads decoding a batch in each worker (default: the cores shared among the workers)",
    )
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser(
        "course", help="make the student edition of the course (every build a stub, graded), or build a translation"
    )
    made = p.add_mutually_exclusive_group(required=True)
    made.add_argument(
        "--student", metavar="DIR", help="folder to write the student edition to (new, or an earlier one)"
    )
    made.add_argument(
        "--translate",
        metavar="LANGUAGE",
        help="build that edition (zh: notebooks/zh/) from the English notebooks and notebooks/LANGUAGE/translations/",
    )
    p.add_argument("--check", action="store_true", help="with --translate: write nothing, exit 1 unless complete")
    p.add_argument("--todo", action="store_true", help="with --translate: mark what is left to translate")
    p.add_argument("--notebooks", default=None, help="the course's notebooks (default: the clone's notebooks/)")
    p.set_defaults(func=_cmd_course)

    p = sub.add_parser("ddp-demo", help="train a few DDP steps under torchrun and prove the ranks' data is disjoint")
    p.add_argument("--nproc", type=int, default=2, help="processes (ranks) on this machine")
    p.add_argument("--samples", type=int, default=256, help="samples in the epoch")
    p.add_argument("--epochs", type=int, default=1)
    p.set_defaults(func=_cmd_ddp_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # the writers removed their temporary files and stopped their workers on the way out
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while the process exits changes nothing
        print(f"labkit {args.command}: interrupted; no half-written file was kept", file=sys.stderr)
        return 130
    except OSError as e:
        if not is_disk_full(e) and not isinstance(e, (LabkitError, FileNotFoundError)):
            raise
        print(f"labkit {args.command}: {e}", file=sys.stderr)
        return 1 if is_disk_full(e) else 2
    except (LabkitError, ValueError) as e:  # bad input: the message names it and the fix
        print(f"labkit {args.command}: {e}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``labkit`` program: `main`, then its exit code. After Ctrl-C the cleanup has run while the interrupt
    unwound; the process then leaves at once with 130, its helper processes stopped, rather than through the
    interpreter's finalisation, where a Ctrl-C still in flight (one more from the terminal, torch's workers
    shutting down) would end it by SIGINT after its one line had been printed."""
    code = main()
    if code == 130:
        import multiprocessing

        for child in multiprocessing.active_children():
            child.terminate()
            child.join(timeout=5)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    run()
