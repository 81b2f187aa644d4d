"""One thread's share of a batch of JPEGs, cropped by simplejpeg straight into their rows of one uint8 batch.

This is the loop the batch engine (`labkit.datasets.batch_decode`) runs in each of its threads. For its share of
the batch's rows a thread takes each sample's bytes (or reads its file), parses the header (C), draws the boxes of
the whole share in one vectorised call (`labkit.decode.crop_box`), decodes each JPEG at the DCT scale its box
allows (C, the GIL released), and resizes the box into its row (one torch kernel, the flip a view). Python calls
per sample: the resize's two wrappers, and the EXIF parser for a file that carries EXIF; the rest is done per share.

A file this path does not decode (not a JPEG; a CMYK or YCCK JPEG, which Pillow converts) is handed back to the
caller, which decodes it on its own per-sample path, the same box drawn for it; a file that cannot be read or
decoded is reported as failed, for the caller to name (or substitute) through that same path. The pixels are
those of `labkit.decode.simplejpeg_decoder.crop_simplejpeg` for the same box, bit for bit (a test holds them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from labkit.decode.crop_box import CropBoxes
from labkit.decode.jpeg_orientation import exif_orientation, rotates
from labkit.decode.resize import resize_uint8
from labkit.decode.simplejpeg_decoder import JPEG_START, OWN_COLORSPACES, as_displayed

#: (rows of the batch, each image's displayed (height, width)) -> their boxes: the batch's plan, asked for a share.
BoxesFor = Callable[[np.ndarray, np.ndarray], CropBoxes]
#: A sample's encoded bytes, or the path of the file holding them (read by the thread that decodes it).
Source = bytes | str
_EXIF = b"Exif\x00\x00"
_MARKER_SPAN = 65536  # an APP1 segment starts within the first 64 KiB (its length field is 16 bits)


@dataclass
class ShareOutcome:
    """What a share left to its caller: rows that failed (unreadable, undecodable, too large) and rows handed back
    (files this path does not decode)."""

    failed: list[int] = field(default_factory=list)
    handed_back: list[int] = field(default_factory=list)


#: A decoder's batch loop: (rows, sources, boxes_for, out batch, max_pixels) -> what it left to the caller.
ShareCropper = Callable[[Sequence[int], Sequence[Source], BoxesFor, torch.Tensor, int], ShareOutcome]


def crop_share_simplejpeg(
    rows: Sequence[int], sources: Sequence[Source], boxes_for: BoxesFor, out: torch.Tensor, max_pixels: int
) -> ShareOutcome:
    """Row ``k`` of ``out`` (a B×3×H×W uint8 batch) for each ``k`` in ``rows``: ``sources[k]`` decoded at the DCT
    scale its box needs, the box cut, resized to H×W and flipped if drawn so."""
    import simplejpeg

    decode_header, decode = simplejpeg.decode_jpeg_header, simplejpeg.decode_jpeg
    outcome = ShareOutcome()
    kept: list[int] = []
    raws: list[bytes] = []
    stored: list[tuple] = []
    orientations: list[int] = []
    for k in rows:
        raw = sources[k]
        try:
            if type(raw) is str:
                with open(raw, "rb") as f:
                    raw = f.read()
            if raw[:3] != JPEG_START:
                outcome.handed_back.append(k)
                continue
            height, width, colorspace, _ = decode_header(raw)
        except (OSError, ValueError):
            outcome.failed.append(k)
            continue
        if colorspace not in OWN_COLORSPACES:
            outcome.handed_back.append(k)
        elif height * width > max_pixels:
            outcome.failed.append(k)
        else:
            kept.append(k)
            raws.append(raw)
            stored.append((height, width))
            orientations.append(1 if raw.find(_EXIF, 0, _MARKER_SPAN) < 0 else exif_orientation(raw))
    if not kept:
        return outcome
    stored_hw = np.array(stored, dtype=np.int64)
    turned = np.array([rotates(o) for o in orientations]) if max(orientations) > 1 else None
    shown_hw = stored_hw if turned is None else np.where(turned[:, None], stored_hw[:, ::-1], stored_hw)
    boxes = boxes_for(np.array(kept, dtype=np.int64), shown_hw)
    output_hw = tuple(out.shape[-2:])
    scales = boxes.reductions(output_hw)
    scaled_stored = -(-stored_hw // scales[:, None])  # libjpeg's size at 1/scale: rounded up
    scaled_shown = scaled_stored if turned is None else np.where(turned[:, None], scaled_stored[:, ::-1], scaled_stored)
    edges = boxes.on_decoded(scaled_shown).tolist()
    flips = boxes.flip.tolist()
    for j, (k, raw, (min_h, min_w), orientation) in enumerate(zip(kept, raws, scaled_stored.tolist(), orientations)):
        try:
            pixels = decode(raw, "RGB", min_height=min_h, min_width=min_w)
        except ValueError:
            outcome.failed.append(k)
            continue
        if orientation != 1:
            pixels = as_displayed(pixels, orientation)
        top, left, bottom, right = edges[j]
        if pixels.shape[0] != scaled_shown[j, 0] or pixels.shape[1] != scaled_shown[j, 1]:  # not libjpeg's usual
            top, left, bottom, right = boxes[j].scaled(pixels.shape[:2])
        region = torch.from_numpy(np.ascontiguousarray(pixels[top:bottom, left:right])).permute(2, 0, 1)
        resized = resize_uint8(region, output_hw)
        out[k].copy_(resized.flip(-1) if flips[j] else resized)
    return outcome
