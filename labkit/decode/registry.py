"""Every decoder the kit knows, one record each: the single place the rest of the kit reads them from.

A record says what a decoder is called, how it decodes a whole image and a random-resized crop, which formats its own
library reads (any other file goes through Pillow), whether it decodes a JPEG at a DCT scale or only the crop's detail,
and whether threads can decode in parallel with it. Every decode function marks its stages on a lap clock where handed
one (`labkit.decode.stage_laps`), which the stage timer reads. The dataset's crop note, the stage timer, the bottleneck
explainer, the autotuner, the ablation, ``labkit doctor`` and the loader panel all read these records.

Whether a decoder releases the GIL was measured, not assumed: a batch decoded whole by two threads against
one (the figures, and the machine, are in ``benchmarks/README.md``, "Figures behind design choices").
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.decode.batch_crop import ShareCropper
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE, Decoder, Size
from labkit.decode.pil_crop import CropDecoder, crop_after_decode, crop_pil_reduced
from labkit.decode.pil_decoders import decode_pil, decode_pil_reduced
from labkit.decode.torch_decoders import (
    TORCHCODEC_FORMATS,
    TORCHVISION_FORMATS,
    decode_jpeg_batch,
    decode_torchcodec,
    decode_torchvision,
    torchvision_io,
)

PILLOW_FORMATS: frozenset[str] = frozenset({"JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF", "PPM", "ICO"})
JPEG_ONLY: frozenset[str] = frozenset({"JPEG"})  # libjpeg-turbo's decoders
#: The order in which the kit prefers decoders for speed (measured in benchmarks/train_pipeline.py).
PREFERRED = ("turbojpeg", "simplejpeg", "pil-reduced")
#: The decoder name for pixels stored already decoded (a decoded pack): nothing is decoded.
NO_DECODE = "none"


def decoder_label(name: str) -> str:
    """A decoder's name as tables show it: `NO_DECODE` says what it stands for."""
    return f"{name} (decoded pack)" if name == NO_DECODE else name


@dataclass(frozen=True)
class DecoderInfo:
    """One decoder, as the rest of the kit sees it."""

    name: str
    decode: Decoder  #: (bytes, size, max_pixels) -> uint8 (3, H, W), RGB, EXIF applied
    crop: CropDecoder  #: (bytes, draw, output (h, w), max_pixels) -> uint8 (3, h, w): a random-resized crop
    library: str  #: what does the decoding, for tables
    formats: frozenset[str]  #: read by its own library; any other file goes through Pillow
    scales_in_decode: bool  #: decodes a JPEG at 1/2, 1/4 or 1/8 when the output needs no more
    crops_in_decode: bool  #: a crop box is decoded at only the detail it needs
    releases_gil: bool  #: threads in one process decode in parallel
    install: str = ""  #: what to install where the library is missing ("" for Pillow and torchvision)
    optional: bool = False  #: from an optional extra of labkit (else every install of labkit has it)
    #: its own loop over a thread's share of a batch (`labkit.decode.batch_crop`); None: one `crop` call a sample
    crop_share: ShareCropper | None = None


def _optional(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _known() -> list[tuple[DecoderInfo, bool]]:
    """Every decoder the kit knows, with whether its library imports here."""
    from labkit.decode import turbojpeg_region
    from labkit.decode.batch_crop import crop_share_simplejpeg
    from labkit.decode.simplejpeg_decoder import crop_simplejpeg, decode_simplejpeg

    return [
        (
            DecoderInfo(
                "pil",
                decode_pil,
                crop_after_decode(decode_pil),
                "Pillow",
                PILLOW_FORMATS,
                scales_in_decode=False,
                crops_in_decode=False,
                releases_gil=True,
            ),
            True,
        ),
        (
            DecoderInfo(
                "pil-reduced",
                decode_pil_reduced,
                crop_pil_reduced,
                "Pillow (Image.draft) + torch resize",
                PILLOW_FORMATS,
                scales_in_decode=True,
                crops_in_decode=True,
                releases_gil=True,
            ),
            True,
        ),
        (
            DecoderInfo(
                "torchvision",
                decode_torchvision,
                crop_after_decode(decode_torchvision),
                "torchvision.io",
                frozenset(TORCHVISION_FORMATS),
                scales_in_decode=False,
                crops_in_decode=False,
                releases_gil=True,
            ),
            True,
        ),
        (
            DecoderInfo(
                "torchcodec",
                decode_torchcodec,
                crop_after_decode(decode_torchcodec),
                "torchcodec",
                frozenset(TORCHCODEC_FORMATS),
                scales_in_decode=False,
                crops_in_decode=False,
                releases_gil=True,
                install="pip install 'torch-labkit[torchcodec]'",
                optional=True,
            ),
            _optional("torchcodec"),
        ),
        (
            DecoderInfo(
                "simplejpeg",
                decode_simplejpeg,
                crop_simplejpeg,
                "simplejpeg (libjpeg-turbo 3) + torch resize",
                JPEG_ONLY,
                scales_in_decode=True,
                crops_in_decode=True,
                releases_gil=True,
                install="pip install simplejpeg",
                crop_share=crop_share_simplejpeg,
            ),
            _optional("simplejpeg"),
        ),
        (
            DecoderInfo(
                "turbojpeg",
                decode_simplejpeg,
                turbojpeg_region.crop_turbojpeg,
                "TurboJPEG 3 region decode (crops); simplejpeg (whole images)",
                JPEG_ONLY,
                scales_in_decode=True,
                crops_in_decode=True,
                releases_gil=True,
                install=turbojpeg_region.INSTALL,
            ),
            turbojpeg_region.available(),
        ),
    ]


_KNOWN = _known()
#: The decoders installed here, by name, in the order tables show them.
DECODERS: dict[str, DecoderInfo] = {info.name: info for info, installed in _KNOWN if installed}
#: The decoders the kit knows whose library is not installed here: name -> what to install.
MISSING: dict[str, str] = {info.name: info.install for info, installed in _KNOWN if not installed}


@dataclass(frozen=True)
class DeviceDecoderInfo:
    """A decoder that runs on an accelerator, a batch at a time, after the loader: the workers hand over the encoded
    files (`labkit.datasets.pack_datasets.EncodedPackDataset`) and this decodes the batch where the model is. The
    datasets never take one (their workers decode on the CPU), so `DECODERS` does not list it."""

    name: str
    decode_batch: Callable[..., torch.Tensor]  #: (uint8 byte tensors, size, device) -> uint8 N×3×H×W on the device
    library: str
    formats: frozenset[str]
    device_type: str  #: the torch device type it decodes on
    install: str  #: what it needs, where it is missing


#: Decoders of a whole batch on an accelerator, by name; `device_decoder` says whether this machine has one's device.
DEVICE_DECODERS: dict[str, DeviceDecoderInfo] = {
    "nvjpeg": DeviceDecoderInfo(
        "nvjpeg",
        decode_jpeg_batch,
        "nvJPEG (torchvision.io.decode_jpeg on CUDA)",
        JPEG_ONLY,
        "cuda",
        "a CUDA device, with torch and torchvision built for CUDA",
    ),
}


def device_decoder(name: str) -> DeviceDecoderInfo:
    """The record of the device decoder ``name``, where this machine has its device; a clear error otherwise."""
    info = DEVICE_DECODERS.get(name)
    if info is None:
        raise LabkitValueError(
            f"unknown device decoder {name!r}; choose one of {', '.join(DEVICE_DECODERS)} (a "
            f"decoder for the datasets is one of {', '.join(DECODERS)})"
        )
    if info.device_type == "cuda" and not torch.cuda.is_available():
        raise LabkitError(
            f"the {name} decoder needs {info.install}; none is here (decode on the CPU with one of "
            f"{', '.join(DECODERS)})"
        )
    return info


def decoder_info(name: str) -> DecoderInfo:
    """The record of the decoder called ``name``; a clear error lists the valid names, or says what to install."""
    try:
        return DECODERS[name]
    except KeyError:
        if name in DEVICE_DECODERS:
            raise LabkitValueError(
                f"{name} decodes a batch on a {DEVICE_DECODERS[name].device_type.upper()} device "
                "after the loader, not in a dataset's workers: open the pack with EncodedPackDataset and "
                "decode each batch with labkit.decode.registry.device_decoder(name).decode_batch "
                f"(or pick one of {', '.join(DECODERS)})"
            ) from None
        if name in MISSING:
            raise LabkitError(
                f"the {name} decoder is not installed here: {MISSING[name]} (or choose one of {', '.join(DECODERS)})"
            ) from None
        raise LabkitValueError(f"unknown decoder {name!r}; choose one of {', '.join(DECODERS)}") from None


def get_decoder(name: str) -> Decoder:
    """The decode function of the decoder called ``name``: (bytes, size, max_pixels) -> uint8 (3, H, W)."""
    info = decoder_info(name)
    if info.name == "torchvision":
        torchvision_io()  # imported here, so a forked worker inherits it instead of paying on its first image
    return info.decode


def decode_image(
    data: bytes, size: Size = OUTPUT_SIZE, decoder: str = "pil", max_pixels: int = MAX_PIXELS
) -> torch.Tensor:
    """Decode ``data`` with the decoder named ``decoder`` to a uint8 tensor of shape (3, H, W)."""
    return get_decoder(decoder)(data, size, max_pixels)


def crops_in_decode(decoder: str) -> bool:
    """Whether ``decoder`` decodes only the detail a crop box needs (else: a full decode, then the same box)."""
    return decoder_info(decoder).crops_in_decode


def preferred_decoder() -> str:
    """The fastest decoder installed here (`PREFERRED`)."""
    return next(name for name in PREFERRED if name in DECODERS)


def decoder_table() -> str:
    """What is installed, one line per decoder, and what the missing ones need: for ``labkit doctor`` and the panel."""
    lines = []
    for info in DECODERS.values():
        does = [
            w
            for w, yes in (
                ("DCT-scaled", info.scales_in_decode),
                ("crops in the decode", info.crops_in_decode),
                ("threads in parallel", info.releases_gil),
            )
            if yes
        ]
        lines.append(f"{info.name:<12} {info.library}; {', '.join(does) or 'full decode'}")
    lines += [f"{name:<12} not installed: {install}" for name, install in MISSING.items()]
    lines += [
        f"{name:<12} {info.library}; whole batches on a {info.device_type.upper()} device, after the loader"
        for name, info in DEVICE_DECODERS.items()
    ]
    return "\n".join(lines)
