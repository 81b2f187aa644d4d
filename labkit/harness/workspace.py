"""The files a measurement runs on: an ImageFolder, its pack and its decoded pack, made and checked.

`prepare` packs an ImageFolder (again, if the folder changed since) and verifies both packs, so
every command that measures starts from sound files — the kit's own photo-like set (`kit_photos`,
made on first use) and a user's own ImageFolder go through exactly the same steps. A folder the
user names must exist: a typo never turns into a folder of made-up photos.

The kit never writes into or beside a user's data, which is often on a read-only or shared
mount: what it derives from a folder outside its own data folder (`data_root`) goes into
``<data_root>/derived/<name>-<hash of the folder's absolute path>/``, or wherever ``work=``
(``--work DIR``) says. A pack there is reused while the folder holds as many images as were
packed and none newer than the pack.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch.utils.data import Dataset

from labkit.core.environment import DATA_ENV, clone_root, configured_data_folder, quick_mode
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.user_paths import check_output_folder, require_folder, write_probe_error
from labkit.datasets.storage_kinds import DECODED_PACK, ENCODED_PACK, FOLDER, PACK, STORAGE_KINDS, open_images
from labkit.decode.decoder_contract import OUTPUT_SIZE
from labkit.harness.synthetic_data import QUICK_COUNT, PhotoSpec, make_photos
from labkit.storage.image_folder import scan_image_folder
from labkit.storage.pack_format import PackError, PackReader, verify_pack
from labkit.storage.packing import pack_folder


class WorkspaceError(LabkitError, OSError):
    """The folder for the files derived from a data set cannot be written."""


@dataclass(frozen=True)
class Workspace:
    folder: str
    pack: str
    decoded_pack: str
    classes: list[str]
    count: int
    work: str  # where the packs (and a demo's results) made from `folder` are kept

    def path_of(self, kind: str) -> str:
        """Where this set is stored as ``kind`` (`labkit.datasets.storage_kinds`): the folder, or one of its packs."""
        paths = {FOLDER: self.folder, PACK: self.pack, DECODED_PACK: self.decoded_pack, ENCODED_PACK: self.pack}
        if kind not in paths:
            raise LabkitValueError(f"storage kind {kind!r}: one of {', '.join(STORAGE_KINDS)}")
        return paths[kind]

    def open(self, kind: str, decoder: str | None = None, size: int = OUTPUT_SIZE, **options: Any) -> Dataset:
        """This set stored as ``kind``, as a dataset (`labkit.datasets.storage_kinds.open_images`, which takes
        ``options``: transform, crop, check_crc)."""
        return open_images(kind, self.path_of(kind), decoder, size, **options)


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # on different drives (Windows)
        return False


def derived_folder(folder: str, work: str | None = None) -> str:
    """Where the files made from ``folder`` go: ``work`` when given; beside ``folder`` when it lies in the
    kit's own data folder (`data_root`); else ``<data_root>/derived/<name>-<10 hex digits of the hash of
    its absolute path>``, so two folders of the same name never share packs."""
    if work:
        return work
    if _inside(folder, data_root()):
        return os.path.dirname(os.path.abspath(folder))
    digest = hashlib.sha1(os.path.realpath(folder).encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return os.path.join(data_root(), "derived", f"{os.path.basename(os.path.abspath(folder))}-{digest}")


def _writable(folder: str, source: str, work: str | None) -> None:
    """Raise `WorkspaceError` naming ``folder`` and the way to move it unless files can be made in it."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        error: OSError | None = e
    else:
        error = write_probe_error(folder)
    if error is not None:
        how = "pass another --work DIR" if work else f"pass --work DIR or set {DATA_ENV} to a folder you can write"
        raise WorkspaceError(
            f"cannot write the packs made from {source} in {folder} ({error.strerror or error}): {how}"
        )


def _newest_mtime(root: str) -> float:
    newest = os.path.getmtime(root)
    for dirpath, _, files in os.walk(root):
        for name in files:
            newest = max(newest, os.path.getmtime(os.path.join(dirpath, name)))
    return newest


def _pack_is_current(pack: str, folder_count: int, folder_mtime: float) -> bool:
    try:
        reader = PackReader(pack)
    except (OSError, PackError):
        return False
    packed = len(reader) + len(reader.meta.get("skipped", []))
    return packed == folder_count and os.path.getmtime(pack) >= folder_mtime


def kit_photos(quick: bool) -> str:
    """The kit's own photo-like set in `data_root`: ``photos-quick`` (256 images, quick mode) or ``photos``
    (2,000), kept apart so switching modes never mixes them; `prepare` makes it on first use."""
    return os.path.join(data_root(), "photos-quick" if quick else "photos")


def prepare(
    folder: str | None = None,
    quick: bool = True,
    size: int = OUTPUT_SIZE,
    progress: bool = True,
    recheck: bool = True,
    work: str | None = None,
    make: bool = False,
) -> Workspace:
    """(Make →) pack (if stale) → verify; print each step; return the paths.

    ``folder=None`` is the kit's own photo-like set (`kit_photos`), made when missing. A folder that is
    named must exist and hold an ImageFolder, or `LabkitFileNotFoundError` names it before anything is
    written; ``make=True`` makes the photo-like set in it instead, which only a folder inside the kit's data
    folder (`data_root`) may ask. ``work`` is checked before any work starts.

    The packs go where `derived_folder` says (``work`` when given); ``folder`` itself is only read. A pack
    just written always has every checksum verified. ``recheck=False`` skips re-reading the checksums of a
    pack found up to date (its header and index are still checked): the notebooks' choice, since the
    datasets check each record's checksum as they read it anyway.
    """
    if folder is None:
        folder, make = kit_photos(quick), True
    folder = folder.rstrip(os.sep) or os.sep
    if work:
        check_output_folder(work, "--work")
    if make and not os.path.isdir(folder):
        if not _inside(folder, data_root()):
            raise LabkitValueError(
                f"{folder}: the photo-like set is made only inside the kit's data folder "
                f"({data_root()}, {DATA_ENV} moves it); make it elsewhere with "
                f"`labkit data --out {folder}`"
            )
        n = QUICK_COUNT if quick else PhotoSpec().n
        print(f"[data] making {n} photo-like images in {folder}")
        print(make_photos(folder, PhotoSpec(n=n), progress=progress))
    index = scan_image_folder(require_folder(folder))
    mtime = _newest_mtime(folder)
    place = derived_folder(folder, work)
    name = os.path.basename(os.path.abspath(folder))
    pack, decoded = os.path.join(place, f"{name}.pack"), os.path.join(place, f"{name}-{size}.pack")
    if os.path.isabs(pack) and not os.path.isabs(folder) and _inside(pack, os.getcwd()):
        pack, decoded = os.path.relpath(pack), os.path.relpath(decoded)  # printed as the folder was given
    if not work and not _inside(folder, data_root()):
        print(
            f"[work] the packs of {folder} are kept in {place}: the kit does not write beside your data "
            "(--work DIR puts them elsewhere)"
        )
    written = []
    for path, decoded_size in ((pack, None), (decoded, size)):
        if _pack_is_current(path, len(index), mtime):
            print(f"[pack] {path} is up to date")
        else:
            _writable(os.path.dirname(path) or ".", folder, work)
            print(f"[pack] {folder} -> {path}")
            print(pack_folder(folder, path, decoded_size=decoded_size, progress=progress))
            written.append(path)
    for path in (pack, decoded):
        if recheck or path in written:
            print(f"[verify] {verify_pack(path, progress=progress)}")
    return Workspace(folder, pack, decoded, index.classes, len(index), os.path.dirname(pack) or ".")


def shown_path(path: str) -> str:
    """``path`` as the course prints it: relative to the working directory, so no machine's absolute paths show
    (as given where no relative path exists: Windows, another drive)."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


# Where a path can start in a message: at the start, after white space, a quote or a bracket (so not inside a URL,
# "~/..." or "C:/...").
_PATH_START = r"(?:(?<=^)|(?<=[\s'\"(\[]))"
# An absolute path's folders, two deep at least, up to its last part.
_FOLDERS = _PATH_START + r"(?:/[\w.@+-]+){2,}/(?=[\w.@+-])"


def shown_text(text: str, inside: Sequence[str] = ()) -> str:
    """A message (an error, a report) as the course prints it: paths under `data_root` (or under a folder of
    ``inside``, such as a lab's scratch folder) relative to it, and the folders of any other absolute path left
    out, so stored outputs name files without this machine's folders."""
    for folder in list(inside) + [data_root()]:
        text = re.sub(_PATH_START + re.escape(folder.rstrip(os.sep) + os.sep), "", text)
    return re.sub(_FOLDERS, "", text)


def data_root() -> str:
    """The one folder every notebook and command keeps its data in.

    ``LABKIT_DATA`` when set; else ``data/`` at the top of the clone labkit runs from (found from
    the package's own location, so a notebook finds it whatever its working directory); else, for
    an installed labkit, ``~/.cache/labkit``.
    """
    configured = configured_data_folder()
    if configured:
        return configured
    clone = clone_root()
    if clone is not None:
        return os.path.join(clone, "data")
    return os.path.join(os.path.expanduser("~"), ".cache", "labkit")


def course_workspace(quick: bool | None = None, progress: bool = True) -> Workspace:
    """The notebooks' data: made on first use in `data_root`, reused after.

    Quick mode (``LABKIT_QUICK``, on when unset) keeps 256 images in ``photos-quick``; full mode
    keeps the full set in ``photos``, so switching modes never mixes the two. What it prints names
    files relative to `data_root`, so a notebook's stored output shows no machine's paths.
    """
    quick = quick_mode(default=True) if quick is None else quick
    root = data_root()
    os.makedirs(root, exist_ok=True)
    previous = os.getcwd()
    os.chdir(root)  # so what it prints names files relative to the data folder, not this machine's paths
    try:
        ws = prepare(os.path.basename(kit_photos(quick)), quick=quick, progress=progress, recheck=False, make=True)
    finally:
        os.chdir(previous)
    return Workspace(
        *(os.path.join(root, p) for p in (ws.folder, ws.pack, ws.decoded_pack)),
        ws.classes,
        ws.count,
        os.path.join(root, ws.work),
    )
