"""Map-style datasets over an image folder, an encoded pack and a decoded pack (seed section 2.1).

All three share one interface, so a lab swaps storage without touching anything else:
``len(ds)``, ``ds[i] -> (uint8 C×H×W tensor, int label)``, ``ds.__getitems__(indices)``
(batched reads, in file order), ``ds.labels`` (numpy int64), ``ds.classes``.

What they guarantee beyond ``torchvision.datasets.ImageFolder``:

* Paths and index tables live in numpy arrays (`labkit.core.string_table.StringTable`), so worker
  memory does not creep up epoch after epoch through copy-on-write of Python objects.
* A sample that cannot be read raises `SampleError` naming its index and path. With
  ``on_error="skip"`` a readable sample is returned in its place, and ``ds.skipped`` lists each
  broken sample once, with how many times it was substituted — gathered from every DataLoader
  worker, not just the main process (see `LabeledImageDataset.skipped`).
* Images come out as uint8; float conversion and normalisation belong on the device.
* ``crop=RandomResizedCrop(224)`` (`labkit.decode.random_crop`) gives the training pipeline: each
  sample's random-resized crop and flip drawn from (seed, epoch, index) and taken inside the decode
  (``pil-reduced``), or from the stored array (`DecodedArrayDataset`). The epoch is the one the batch was
  drawn for, from the fetch's `labkit.core.epoch_index.epoch_scope` (`make_loader` opens it in every worker,
  persistent ones included), else from `LabeledImageDataset.set_epoch` (which reaches workers only as they
  start).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Dataset

from labkit.core.epoch_index import epoch_of, epochs_of
from labkit.core.errors import LabkitError, LabkitIndexError, LabkitTypeError, LabkitValueError
from labkit.core.host_buffers import batch_buffer
from labkit.core.indices import wrap_indices
from labkit.core.shared_log import SharedLog
from labkit.core.string_table import PathLike, StringTable
from labkit.datasets.batch_decode import BatchDecoder, batch_tensor
from labkit.decode.backends import MAX_PIXELS, OUTPUT_SIZE, DecodeError, Size, target_hw
from labkit.decode.center_crop import CenterCrop
from labkit.decode.batch_crop import BoxesFor, ShareCropper, Source
from labkit.decode.crop_box import crop_resize_flip, whole_images
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.registry import crops_in_decode, decoder_info, get_decoder, preferred_decoder
from labkit.storage.image_folder import scan_image_folder
from labkit.storage.pack_format import PackError, PackReader

#: A crop found before the decode: random-resized for training, central for evaluation.
Crop = Union[RandomResizedCrop, CenterCrop]

Sample = Tuple[Any, int]
ON_ERROR = ("raise", "skip")


class SampleError(LabkitError, RuntimeError):
    """One sample could not be loaded; the message names its index, its path and the fix."""

    def __init__(self, message: str, index: Optional[int] = None, path: Optional[str] = None) -> None:
        # One positional argument, so DataLoader can re-raise it in the main process.
        super().__init__(message)
        self.index = index
        self.path = path


@dataclass(frozen=True)
class SkipRecord:
    """A broken sample under ``on_error="skip"``: where it is, why it failed, and how many times
    another sample was returned in its place (0 for one found broken only while looking for a
    replacement)."""

    index: int
    path: str
    error: str
    substitutions: int = 0


def _summarise_skips(events: List[Dict[str, Any]]) -> List[SkipRecord]:
    """One record per broken sample, oldest first, substitutions added up over every process."""
    first: Dict[int, Dict[str, Any]] = {}
    substitutions: Dict[int, int] = {}
    for e in events:
        first.setdefault(e["index"], e)
        substitutions[e["index"]] = substitutions.get(e["index"], 0) + int(e["substituted"])
    return [SkipRecord(i, e["path"], e["error"], substitutions[i]) for i, e in first.items()]


def _probe_stride(n: int) -> int:
    """A step coprime with ``n`` near 0.618 n: stepping by it from any sample visits every other one,
    the first few far away (a substitute from another part of the set, usually another class)."""
    stride = max(1, round(n * 0.6180339887))
    while math.gcd(stride, n) != 1:
        stride += 1
    return stride


_LOAD_ERRORS = (DecodeError, PackError, OSError)
_LASTING_ERRORS = (DecodeError, PackError, FileNotFoundError, IsADirectoryError, PermissionError)


def output_hw(size: Size, default: Size, crop: Optional[Crop]) -> Optional[Tuple[int, int]]:
    """The size a dataset's samples come out at: ``size``, or the crop's own, never both without a word."""
    if crop is None:
        return target_hw(size)
    if size != default:
        raise LabkitValueError(f"size={size!r} and crop={crop!r}: the crop's size ({crop.size}) is the output; "
                               "leave size= out (or give the crop the size you want)")
    return crop.output_hw


def _crop_note(crop: Optional[Crop], decoder: str) -> str:
    if crop is None:
        return ""
    where = "inside the decode" if crops_in_decode(decoder) else "after a full decode"
    kind = "centre crops" if isinstance(crop, CenterCrop) else "random-resized crops"
    return f", {kind} {where}"


def check_on_error(on_error: str) -> None:
    """Refuse an ``on_error`` the datasets do not know, before any work."""
    if on_error not in ON_ERROR:
        raise LabkitValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")


class LabeledImageDataset(Dataset):
    """The shared behaviour of labkit's image datasets: indexing, labels, errors and skips, and batches
    decoded by threads straight into one tensor (`labkit.datasets.batch_decode`)."""

    labels: np.ndarray
    classes: List[str]
    size: Optional[Tuple[int, int]] = None  #: every image's (height, width); None where they differ
    fills_batches = False  #: whether `__getitems__` can decode a batch into one tensor (images of one shape)

    def __init__(self, transform: Optional[Callable[[torch.Tensor], Any]], on_error: str,
                 crop: Optional[Crop] = None, decode_threads: Optional[int] = None) -> None:
        check_on_error(on_error)
        if crop is not None and not isinstance(crop, (RandomResizedCrop, CenterCrop)):
            raise LabkitTypeError(f"crop={crop!r}: pass a labkit RandomResizedCrop (training) or CenterCrop "
                                  "(evaluation), whose box is found before the decode; a torchvision transform goes "
                                  "in transform=")
        self.transform = transform
        self.on_error = on_error
        self.crop = crop
        self.epoch = 0  # the epoch of an index fetched outside any epoch scope
        self._skips = SharedLog("labkit-skips-") if on_error == "skip" else None
        self._known_broken: Dict[int, str] = {}  # this process's: index -> error, never decoded again here
        self._batches = BatchDecoder(decode_threads)

    @property
    def decode_threads(self) -> Optional[int]:
        """Threads that decode a batch in each process that fetches one; None: its share of the cores."""
        return self._batches.threads

    @decode_threads.setter
    def decode_threads(self, threads: Optional[int]) -> None:
        self._batches.threads = threads

    # Subclasses say how to read and decode one sample and how to name it in messages. The two
    # stages are separate so that a profiler can time them apart (labkit.measure.step_profile).
    def read_raw(self, index: int) -> Any:
        """Sample ``index`` as stored: encoded bytes, or a decoded array."""
        raise NotImplementedError

    def decode_raw(self, raw: Any) -> torch.Tensor:
        """What `read_raw` returned → uint8 C×H×W image."""
        raise NotImplementedError

    def crop_raw(self, raw: Any, index: int, epoch: int) -> torch.Tensor:
        """What `read_raw` returned → sample ``index``'s random-resized crop in ``epoch`` (``self.crop``)."""
        raise LabkitTypeError(f"{type(self).__name__} does not decode, so it cannot crop: crop on the device")

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose crops indices fetched outside an epoch scope draw. Workers see it only when they start
        (persistent workers never again): `labkit.workers.loader_factory.make_loader` hands every worker the
        epoch with each batch instead (`labkit.datasets.epoch_scoped`)."""
        self.epoch = int(epoch)

    def batch_sources(self, indices: np.ndarray) -> Optional[List[Source]]:
        """Samples ``indices`` (checked) for a batch, in one call: their bytes where the storage reads a batch at once
        (a pack: one slice of its offsets, every checksum checked), or their files' paths, each read by the thread
        that decodes it (the reads then overlap); None where the storage has neither (one `read_raw` a sample)."""
        return None

    @property
    def crop_share(self) -> Optional[ShareCropper]:
        """The decoder's own loop over a share of a batch (`labkit.decode.batch_crop`), or None (a call a sample)."""
        return None

    def load_raw(self, raw: Any, index: int, epoch: int) -> torch.Tensor:
        """What `read_raw` returned → sample ``index``'s image: decoded, or its crop in ``epoch``."""
        return self.decode_raw(raw) if self.crop is None else self.crop_raw(raw, index, epoch)

    def _load(self, index: int, epoch: int = 0) -> torch.Tensor:
        return self.load_raw(self.read_raw(index), index, epoch)

    def sample_path(self, index: int) -> str:
        """Where sample ``index`` comes from, for error messages and reports."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.labels)

    def _check_index(self, index: int) -> int:
        n = len(self)
        if not -n <= index < n:
            raise LabkitIndexError(f"sample index {index} out of range for a dataset of {n} samples")
        return int(index) % n

    def _check_indices(self, indices: Sequence[int]) -> List[int]:
        """`_check_index` of a whole batch, at once."""
        return wrap_indices(indices, len(self), self._check_index).tolist()

    def _try_load(self, index: int, epoch: int) -> Sample:
        try:
            image = self._load(index, epoch)
        except _LOAD_ERRORS as e:
            raise SampleError(f"sample {index} ({self.sample_path(index)!r}): {e}. Remove or replace the file, "
                              "or pass on_error='skip' to substitute another sample and record it in "
                              ".skipped", index, self.sample_path(index)) from e
        if self.transform is not None:
            image = self.transform(image)
        return image, int(self.labels[index])

    def __getitem__(self, index: int) -> Sample:
        epoch = epoch_of(index, self.epoch)
        index = self._check_index(index)
        if self._skips is None:
            return self._try_load(index, epoch)
        n = len(self)
        stride = _probe_stride(n)
        # The substitute for `index` is the first loadable sample of a fixed probe sequence, so it is
        # the same in every process and every run (a resumed run substitutes the same samples);
        # samples this process already knows are broken are passed over without decoding them again.
        for k in range(n):
            candidate = (index + k * stride) % n
            if candidate not in self._known_broken:
                try:
                    sample = self._try_load(candidate, epoch)
                except SampleError as e:
                    error = str(e.__cause__)
                    if isinstance(e.__cause__, _LASTING_ERRORS):  # a failed read (EIO, EMFILE) may succeed later
                        self._known_broken[candidate] = error
                    if k == 0:
                        index_error = error
                    self._skips.append({"index": candidate, "path": self.sample_path(candidate), "error": error,
                                        "substituted": False})
                    continue
                if k > 0:
                    self._skips.append({"index": index, "path": self.sample_path(index), "substituted": True,
                                        "error": self._known_broken.get(index, index_error)})
                return sample
            if k == 0:
                index_error = self._known_broken[index]
        raise SampleError(f"every one of the {n} samples failed to load; see .skipped", index)

    def __getitems__(self, indices: Sequence[int], out: Optional[torch.Tensor] = None) -> List[Sample]:
        """A batch of samples, read in storage order (better locality), returned in the order asked.

        Where every image has one shape and there is no ``transform``, the images are the rows of one uint8
        tensor, decoded by `decode_threads` threads: ``out`` if given (a batch slot: `labkit.workers.shared_slots`),
        else a new one. The batch is planned once: its indices, their epochs and every crop's random draws, made
        for the whole batch (`labkit.decode.crop_box.counter_uniforms`); read once (`batch_sources`); and decoded
        by the decoder's own loop over each thread's share where it has one (`crop_share`). A sample that fails is
        fetched again on its own, so it is named (or substituted under ``on_error="skip"``) as by ``ds[i]``."""
        checked = self._check_indices(indices)
        order = np.argsort(self._storage_order(checked), kind="stable").tolist()
        if not (self.fills_batches and self.transform is None and self.size is not None and checked):
            samples: List[Sample] = [None] * len(checked)  # type: ignore[list-item]
            for k in order:
                samples[k] = self[indices[k]]  # as it came, in this thread's epoch scope
            return samples
        batch = batch_tensor(len(checked), (3, *self.size), out)
        rows = np.asarray(checked, dtype=np.int64)
        epochs = np.asarray(epochs_of(indices, self.epoch), dtype=np.int64)
        try:
            sources = self.batch_sources(rows)
        except _LOAD_ERRORS:  # one cannot be read: each is read again on its own, so that one is named or skipped
            sources = None
        crop_share = self.crop_share if sources is not None else None
        if crop_share is not None:
            left = self._batches.crop_rows(batch, order, sources, self._boxes_for(rows, epochs), crop_share,
                                           self.max_pixels)
            failed, apart = left.failed, left.handed_back
        else:
            failed, apart = [], order
        if apart:
            def load(k: int) -> torch.Tensor:
                source = None if sources is None else sources[k]
                raw = self.read_raw(checked[k]) if source is None or isinstance(source, str) else source
                return self.load_raw(raw, checked[k], int(epochs[k]))
            failed = sorted(failed + self._batches.load_rows(batch, apart, load, _LOAD_ERRORS))
        labels = [int(self.labels[i]) for i in checked]
        for k in failed:
            image, labels[k] = self[indices[k]]  # raises SampleError naming it, or gives its substitute
            batch[k].copy_(image)
        return list(zip(batch, labels))

    def _boxes_for(self, rows: np.ndarray, epochs: np.ndarray) -> BoxesFor:
        """The batch's plan for a share of it: its rows' crop boxes (or whole images, for a plain resize), drawn
        together from their indices and epochs."""
        crop = self.crop
        if crop is None:
            return lambda share, image_hw: whole_images(image_hw)
        return lambda share, image_hw: crop.draw_many(image_hw, rows[share], epochs[share])

    def _storage_order(self, indices: List[int]) -> np.ndarray:
        return np.asarray(indices)

    @property
    def skipped(self) -> List[SkipRecord]:
        """The running total under ``on_error="skip"``: each broken sample found so far (by any process,
        in any epoch, since the dataset was made or `clear_skipped`), once, with its substitutions added up.

        For one epoch's report, take ``mark = ds.skip_mark()`` before the epoch and call
        ``ds.skipped_since(mark)`` after it.
        """
        return self.skipped_since(0)

    def skip_mark(self) -> int:
        """A point in the skip log; `skipped_since` reports only what happened after it."""
        return self._skips.mark() if self._skips is not None else 0

    def skipped_since(self, mark: int) -> List[SkipRecord]:
        """Broken samples met after ``mark`` (from `skip_mark`), once each, with the substitutions made since."""
        return _summarise_skips(self._skips.records(since=mark)) if self._skips is not None else []

    def clear_skipped(self) -> None:
        """Empty the report. Processes still remember which samples they found broken."""
        if self._skips is not None:
            self._skips.clear()


def class_labels(labels: Sequence[Any], classes: Optional[Sequence[str]], where: str) -> Tuple[np.ndarray, List[str]]:
    """Labels as class indices, and the class names: names are looked up in ``classes`` (sorted, as an
    ImageFolder's, when not given); indices must be below ``len(classes)`` (default: the largest + 1)."""
    if len(labels) and isinstance(labels[0], str):
        names = sorted(set(labels)) if classes is None else [str(c) for c in classes]
        position = {name: k for k, name in enumerate(names)}
        unknown = next((y for y in labels if y not in position), None)
        if unknown is not None:
            raise LabkitValueError(f"{where}: label {unknown!r} is not one of the classes {names[:10]}: add it to "
                                   "classes=, or fix the label")
        return np.fromiter((position[y] for y in labels), np.int64, len(labels)), names
    try:
        indices = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise LabkitTypeError(f"{where}: labels must be class indices (ints) or class names (strings), "
                              f"not {type(labels[0]).__name__}") from None
    names = [str(c) for c in classes] if classes is not None else [str(k) for k in range(int(indices.max(initial=-1)) + 1)]
    bad = np.flatnonzero((indices < 0) | (indices >= len(names)))
    if len(bad):
        raise LabkitValueError(f"{where}: sample {int(bad[0])} has label {int(indices[bad[0]])}, outside the "
                               f"{len(names)} classes: labels are 0..{len(names) - 1}")
    return indices, names


class EncodedImages:
    """What the datasets of encoded images share: their decoder, the size they decode to, and the decode and crop
    of one sample's bytes. Mixed in before `LabeledImageDataset`."""

    crop: Optional[Crop]

    def use_decoder(self, decoder: Optional[str], size: Size, crop: Optional[Crop], max_pixels: int) -> None:
        """Decode with ``decoder`` (None: the fastest installed, `preferred_decoder`) to ``size`` or ``crop``'s."""
        self.decoder = preferred_decoder() if decoder is None else decoder
        self._decode = get_decoder(self.decoder)
        self.size = output_hw(size, 256, crop)
        self.max_pixels = max_pixels

    @property
    def crop_share(self) -> Optional[ShareCropper]:
        """The decoder's own loop over a share of a batch, where its record has one."""
        return decoder_info(self.decoder).crop_share

    def decode_raw(self, raw: bytes) -> torch.Tensor:
        """The sample's bytes decoded to ``size``."""
        return self._decode(raw, self.size, self.max_pixels)

    def crop_raw(self, raw: bytes, index: int, epoch: int) -> torch.Tensor:
        """The sample's bytes decoded to its crop in ``epoch`` (``crop.decode``'s work, its box drawn for this
        sample: the crop's own draw, given the sample and the epoch)."""
        draw = functools.partial(self.crop.draw, index=index, epoch=epoch)  # type: ignore[union-attr]
        return decoder_info(self.decoder).crop(raw, draw, self.size, self.max_pixels)


class ImageFilesDataset(EncodedImages, LabeledImageDataset):
    """Image files named in a list, each with its label (a class index or a class name), decoded by
    ``decoder`` (default: the fastest installed, `labkit.decode.registry.preferred_decoder`) to ``size``:
    a CSV of labels, a list of files, anything that is not laid out as an ImageFolder. Relative paths are
    taken from ``root``. The files are only read; a missing one is named when it is read (``on_error``)."""

    fills_batches = True

    def __init__(self, files: Sequence[PathLike], labels: Sequence[Any], classes: Optional[Sequence[str]] = None,
                 decoder: Optional[str] = None, size: Size = OUTPUT_SIZE,
                 transform: Optional[Callable[[torch.Tensor], Any]] = None, on_error: str = "raise",
                 max_pixels: int = MAX_PIXELS, crop: Optional[Crop] = None, decode_threads: Optional[int] = None,
                 root: PathLike = "") -> None:
        super().__init__(transform, on_error, crop, decode_threads)
        if isinstance(files, (str, bytes, os.PathLike)):
            raise LabkitTypeError(f"files={files!r} is one path: give a list of image files (an ImageFolder goes "
                                  "to ImageFolderDataset, a pack to PackedDataset)")
        if len(files) != len(labels):
            raise LabkitValueError(f"{len(files)} files but {len(labels)} labels: one label per file")
        self.root = os.fspath(root)
        self.relpaths = files if isinstance(files, StringTable) else StringTable.from_strings(files)
        self.labels, self.classes = class_labels(labels, classes, "ImageFilesDataset")
        self.use_decoder(decoder, size, crop, max_pixels)

    def sample_path(self, index: int) -> str:
        return os.path.join(self.root, self.relpaths[index])

    def read_raw(self, index: int) -> bytes:
        with open(self.sample_path(index), "rb") as f:
            return f.read()

    def batch_sources(self, indices: np.ndarray) -> List[str]:
        paths = self.relpaths.strings(indices)
        if os.name != "posix" or not self.root:
            return [os.path.join(self.root, path) for path in paths]
        prefix = os.path.join(self.root, "")  # os.path.join's result, without its Python calls per path
        return [path if path[:1] == "/" else prefix + path for path in paths]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.root!r}, {len(self)} images, {len(self.classes)} classes, "
                f"decoder={self.decoder!r}, size={self.size}{_crop_note(self.crop, self.decoder)})")


class ImageFolderDataset(ImageFilesDataset):
    """Images in an ImageFolder tree (``root/<class>/<file>``), decoded by ``decoder`` (default: the fastest
    installed, `labkit.decode.registry.preferred_decoder`) to ``size``."""

    def __init__(self, root: PathLike, decoder: Optional[str] = None, size: Size = OUTPUT_SIZE,
                 transform: Optional[Callable[[torch.Tensor], Any]] = None, on_error: str = "raise",
                 max_pixels: int = MAX_PIXELS, crop: Optional[Crop] = None,
                 decode_threads: Optional[int] = None) -> None:
        check_on_error(on_error)  # before the scan, which may take minutes on a large folder
        index = scan_image_folder(root)
        super().__init__(index.relpaths, index.labels, index.classes, decoder, size, transform, on_error, max_pixels,
                         crop, decode_threads, root=index.root)


class PackBackedDataset(LabeledImageDataset):
    """What the pack datasets share: the reader, labels and classes from its index, paths for messages,
    and batched reads in file order."""

    def __init__(self, pack_path: PathLike, transform: Optional[Callable[[torch.Tensor], Any]], on_error: str,
                 check_crc: bool, kind: str, wrong_kind: str, crop: Optional[Crop] = None,
                 decode_threads: Optional[int] = None) -> None:
        super().__init__(transform, on_error, crop, decode_threads)
        self.reader = PackReader(pack_path, check_crc=check_crc)
        if self.reader.kind != kind:
            raise LabkitValueError(f"{self.reader.path}: {wrong_kind}")
        self.classes = self.reader.classes
        self.labels = self.reader.labels

    def sample_path(self, index: int) -> str:
        return f"{self.reader.path}:{self.reader.paths[index]}"

    def _storage_order(self, indices: List[int]) -> np.ndarray:
        return self.reader.records["offset"][indices]


class PackedDataset(EncodedImages, PackBackedDataset):
    """Encoded images from one pack file (`labkit pack`), read through mmap and decoded by ``decoder``
    (default: the fastest installed)."""

    fills_batches = True

    def __init__(self, pack_path: PathLike, decoder: Optional[str] = None, size: Size = OUTPUT_SIZE,
                 transform: Optional[Callable[[torch.Tensor], Any]] = None, on_error: str = "raise",
                 max_pixels: int = MAX_PIXELS, check_crc: bool = True, crop: Optional[Crop] = None,
                 decode_threads: Optional[int] = None) -> None:
        super().__init__(pack_path, transform, on_error, check_crc, "encoded",
                         "holds decoded arrays; open it with DecodedArrayDataset", crop, decode_threads)
        self.use_decoder(decoder, size, crop, max_pixels)

    def read_raw(self, index: int) -> bytes:
        return self.reader.read(index)

    def batch_sources(self, indices: np.ndarray) -> List[bytes]:
        return self.reader.read_many(indices)

    def __repr__(self) -> str:
        return (f"PackedDataset({self.reader.path!r}, {len(self)} images, {len(self.classes)} classes, "
                f"decoder={self.decoder!r}, size={self.size}{_crop_note(self.crop, self.decoder)})")


class DecodedArrayDataset(PackBackedDataset):
    """Pre-decoded, pre-resized uint8 images from a pack made with ``labkit pack --decoded N``.

    No decode at all: the bound FFCV's RAW mode reaches. ``__getitems__`` copies a whole
    batch out of the mapping into one array (with ``crop=``, each sample's crop into its row).
    """

    fills_batches = True

    def __init__(self, pack_path: PathLike, transform: Optional[Callable[[torch.Tensor], Any]] = None,
                 on_error: str = "raise", size: Size = None, check_crc: bool = True,
                 crop: Optional[Crop] = None, decode_threads: Optional[int] = None) -> None:
        super().__init__(pack_path, transform, on_error, check_crc, "decoded",
                         "holds encoded images; open it with PackedDataset, or make a decoded pack with "
                         "`labkit pack --decoded SIZE`", crop, decode_threads)
        stored = tuple(self.reader.decoded_shape[-2:])
        if size is not None and target_hw(size) != stored:
            raise LabkitValueError(f"{self.reader.path}: images are stored at {stored[0]}x{stored[1]}, not {size}; "
                             "re-pack with `labkit pack --decoded` at the size you need")
        self.stored_hw: Tuple[int, int] = (int(stored[0]), int(stored[1]))
        self.size = self.stored_hw if crop is None else crop.output_hw

    def read_raw(self, index: int) -> np.ndarray:
        return self.reader.read_decoded([index])[0]

    def decode_raw(self, raw: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(raw)

    def crop_raw(self, raw: np.ndarray, index: int, epoch: int) -> torch.Tensor:
        """The crop taken from the stored image: its box is drawn for the stored size."""
        box = self.crop.draw(*self.stored_hw, index, epoch)  # type: ignore[union-attr]
        return crop_resize_flip(torch.from_numpy(raw), box, self.size)

    def __getitems__(self, indices: Sequence[int], out: Optional[torch.Tensor] = None) -> List[Sample]:
        if self.crop is not None:  # each sample its own box, cropped into its row of the batch
            return super().__getitems__(indices, out)
        checked = self._check_indices(indices)
        batch = batch_buffer((len(checked), *self.reader.decoded_shape)) if out is None else out
        try:
            self.reader.read_decoded(checked, out=batch.numpy())
        except PackError:
            return super().__getitems__(checked)  # per-sample path: names the sample, honours on_error
        images = list(batch) if self.transform is None else [self.transform(img) for img in batch]
        return [(img, int(self.labels[i])) for img, i in zip(images, checked)]

    def __repr__(self) -> str:
        crop = "" if self.crop is None else f", crops {self.crop.output_hw[0]}x{self.crop.output_hw[1]} from them"
        return f"DecodedArrayDataset({self.reader.path!r}, {len(self)} images of {self.reader.decoded_shape}{crop})"


class EncodedPackDataset(PackBackedDataset):
    """The encoded files of a pack, undecoded, as uint8 byte tensors: for decoding on the GPU.

    Workers only read; `labkit.decode.backends.decode_jpeg_batch` decodes a whole batch on the device.
    Collate with `labkit.collate.batching.list_collate` (files differ in length).
    """

    def __init__(self, pack_path: PathLike, on_error: str = "raise", check_crc: bool = True) -> None:
        super().__init__(pack_path, None, on_error, check_crc, "encoded",
                         "holds decoded arrays, there is nothing left to decode")

    def read_raw(self, index: int) -> bytes:
        return self.reader.read(index)

    def decode_raw(self, raw: bytes) -> torch.Tensor:
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8)





