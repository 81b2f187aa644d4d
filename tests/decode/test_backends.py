import io
import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from labkit.bench.synthetic_data import PhotoSpec, encode_sample, plan_sample
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.decode import backends
from labkit.decode.backends import (DecodeError, DecompressionBombError, check_decodable, psnr, resize_uint8,
                                    target_hw)
from labkit.decode.registry import DECODERS, decode_image, get_decoder

ALL = list(DECODERS)


def _photo(width=400, height=300, index=0) -> bytes:
    spec = PhotoSpec(n=index + 1, width=width, height=height)
    return encode_sample(spec, plan_sample(spec, index))


def _encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("decoder", ALL)
def test_uint8_chw_at_the_asked_size(decoder):
    data = _photo()
    assert decode_image(data, 64, decoder).shape == (3, 64, 64)
    out = decode_image(data, (48, 80), decoder)
    assert out.shape == (3, 48, 80) and out.dtype == torch.uint8 and out.is_contiguous()
    assert decode_image(data, None, decoder).shape == (3, 300, 400)


@pytest.mark.parametrize("decoder", ["pil-reduced", "torchvision"])
def test_faster_decoders_stay_close_to_pil(decoder):
    for index in range(3):
        data = _photo(800, 600, index)
        quality = psnr(decode_image(data, 256, "pil"), decode_image(data, 256, decoder))
        assert quality >= 30, f"{decoder} differs from pil by {quality:.1f} dB on image {index}"


def _modes():
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
    palette = rgb.convert("P", palette=Image.ADAPTIVE)
    palette.info["transparency"] = 0
    gray16 = Image.fromarray(np.full((24, 32), 40000, dtype=np.uint16))
    return {
        "grayscale jpeg": _encode(rgb.convert("L"), "JPEG"),
        "cmyk jpeg": _encode(rgb.convert("CMYK"), "JPEG"),
        "palette png with transparency": _encode(palette, "PNG"),
        "rgba png": _encode(rgb.convert("RGBA"), "PNG"),
        "la png": _encode(rgb.convert("LA"), "PNG"),
        "16-bit gray png": _encode(gray16, "PNG"),
        "bmp": _encode(rgb, "BMP"),
        "1-bit png": _encode(rgb.convert("1"), "PNG"),
    }


@pytest.mark.parametrize("decoder", ALL)
@pytest.mark.parametrize("kind", list(_modes()))
def test_every_mode_comes_out_rgb(decoder, kind):
    out = decode_image(_modes()[kind], None, decoder)
    assert out.shape == (3, 24, 32) and out.dtype == torch.uint8
    reference = decode_image(_modes()[kind], None, "pil")
    assert psnr(out, reference) >= 30, kind


@pytest.mark.parametrize("decoder", ALL)
def test_sixteen_bit_is_scaled_not_clipped(decoder):
    out = decode_image(_modes()["16-bit gray png"], None, decoder)
    assert abs(int(out.float().mean()) - 40000 // 256) <= 1


@pytest.mark.parametrize("decoder", ALL)
def test_exif_orientation_is_applied(decoder):
    img = Image.new("RGB", (40, 20), "red")
    img.paste((0, 0, 255), (0, 0, 20, 20))  # blue on the left
    exif = Image.Exif()
    exif[0x0112] = 6  # stored rotated: display needs a 90° clockwise turn
    out = decode_image(_encode(img, "JPEG", exif=exif, quality=95), None, decoder)
    assert out.shape == (3, 40, 20)
    assert out[2, :15].float().mean() > 200 and out[0, 25:].float().mean() > 200  # blue now on top


def _jpeg_claiming(width: int, height: int) -> bytes:
    data = bytearray(_encode(Image.new("RGB", (16, 16)), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


@pytest.mark.parametrize("decoder", ALL)
def test_decompression_bombs_are_refused_from_the_header(decoder):
    with pytest.raises(DecompressionBombError, match="900000000|30000x30000"):
        decode_image(_jpeg_claiming(30000, 30000), 256, decoder)
    with pytest.raises(DecompressionBombError, match="12000x9000"):  # under Pillow's own limit, over ours
        decode_image(_jpeg_claiming(12000, 9000), 256, decoder)
    with pytest.raises(DecompressionBombError, match="max_pixels"):
        decode_image(_photo(), 256, decoder, max_pixels=1000)


@pytest.mark.parametrize("decoder", ALL)
@pytest.mark.parametrize("data", [b"", b"<!DOCTYPE html><html></html>", b"\xff\xd8\xff" + b"\0" * 50],
                         ids=["empty", "html", "jpeg-magic-only"])
def test_garbage_raises_decode_error(decoder, data):
    with pytest.raises(DecodeError, match=f"{len(data)} bytes") as e:
        decode_image(data, 32, decoder)
    assert "object at 0x" not in str(e.value)


_RUN_TO_RUN_NOISE = re.compile(r"0x[0-9a-fA-F]{6,}|\.(cpp|cu|h):\d+")


@pytest.mark.parametrize("decoder", ALL)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=st.sampled_from([b"", b"\xff\xd8\xff\xe0", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"RIFF\0\0\0\0WEBP", b"BM"]),
       cut=st.floats(0.0, 1.0), junk=st.binary(max_size=64))
def test_every_decode_error_says_what_the_bytes_are_and_nothing_that_changes_between_runs(decoder, head, cut, junk):
    """Real files cut short, or a format's magic number followed by junk: the message gives the size and
    the first bytes, and no object address or C++ source location (noise that differs run to run)."""
    photo = _photo(64, 48) if head == b"\xff\xd8\xff\xe0" else _encode(Image.new("RGB", (64, 48), "red"), "PNG")
    for data in (photo[: int(len(photo) * cut)], head + junk):
        try:
            decode_image(data, 16, decoder)
        except DecodeError as e:
            assert f"{len(data)} bytes" in str(e) and not _RUN_TO_RUN_NOISE.search(str(e)), str(e)


def _fails(call) -> bool:
    try:
        call()
    except DecodeError:
        return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["JPEG", "grey JPEG", "PNG"]), cut=st.floats(0.0, 1.0),
       flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), max_size=4))
def test_the_packing_check_fails_exactly_when_a_full_decode_fails(kind, cut, flips):
    """`check_decodable` decodes a JPEG at 1/8 scale to save time: a file cut short or with bytes
    changed must fail it exactly when it fails the full decode."""
    photo = _photo(96, 64) if kind == "JPEG" else _encode(
        Image.open(io.BytesIO(_photo(96, 64))).convert("L") if kind == "grey JPEG" else Image.new("RGB", (96, 64)),
        "JPEG" if kind == "grey JPEG" else "PNG")
    data = bytearray(photo[: max(1, int(len(photo) * cut))])
    for where, xor in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= xor
    assert _fails(lambda: check_decodable(bytes(data))) == _fails(lambda: decode_image(bytes(data), None, "pil"))


def test_the_packing_check_refuses_bombs_from_the_header():
    with pytest.raises(DecompressionBombError, match="900000000|30000x30000"):
        check_decodable(_jpeg_claiming(30000, 30000))
    check_decodable(_photo())


@pytest.mark.parametrize("decoder", ALL)
def test_truncated_jpeg_raises_decode_error(decoder):
    data = _photo()
    with pytest.raises(DecodeError):
        decode_image(data[: len(data) // 3], 64, decoder)


def test_unknown_decoder_names_the_choices():
    with pytest.raises(ValueError, match="pil-reduced"):
        get_decoder("fast")


def test_sizes_and_psnr_helpers():
    assert target_hw(8) == (8, 8) and target_hw((2, 3)) == (2, 3) and target_hw(None) is None
    for bad in ((1, 2, 3), 224.0, (224.0, 224), "224", True):
        with pytest.raises(LabkitTypeError, match="give whole pixels"):
            target_hw(bad)
    with pytest.raises(LabkitValueError, match="positive"):
        target_hw((0, 3))
    a = torch.zeros(3, 4, 4, dtype=torch.uint8)
    assert psnr(a, a) == float("inf") and psnr(a, a + 255) == pytest.approx(0.0)


def _torchvision_resize(image, hw):
    from torchvision.transforms.v2 import functional as F

    return F.resize(image, list(hw), interpolation=F.InterpolationMode.BILINEAR, antialias=True)


@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 300), w=st.integers(1, 300), oh=st.integers(1, 200), ow=st.integers(1, 200),
       channels_last=st.booleans(), seed=st.integers(0, 2**16))
def test_resize_is_torchvisions_bit_for_bit_stride_for_stride(h, w, oh, ow, channels_last, seed):
    assume((oh, ow) != (1, 1))  # torchvision fails there; the next test covers it
    pixels = torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
    image = pixels.permute(2, 0, 1) if channels_last else pixels.permute(2, 0, 1).contiguous()
    ours, theirs = resize_uint8(image, (oh, ow)), _torchvision_resize(image, (oh, ow))
    assert torch.equal(ours, theirs) and ours.stride() == theirs.stride()


def test_resize_without_the_vectorised_uint8_kernel_rounds_through_float_as_torchvision_does(monkeypatch):
    monkeypatch.setattr(backends, "NATIVE_UINT8_RESIZE", False)  # ours, read once at import
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")  # torchvision's, read per call
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    image = torch.randint(0, 256, (2, 3, 97, 131), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    ours = resize_uint8(image, (40, 64))
    assert ours.shape == (2, 3, 40, 64) and torch.equal(ours, _torchvision_resize(image, (40, 64)))


def test_a_resize_to_one_pixel_works_where_the_uint8_kernel_asserts(monkeypatch):
    image = torch.randint(0, 256, (3, 5, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    ours = resize_uint8(image, (1, 1))
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")  # torchvision's float path
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert ours.shape == (3, 1, 1) and torch.equal(ours, _torchvision_resize(image, (1, 1)))


def test_only_the_torchvision_decoder_imports_torchvision():
    # A worker that starts fresh imports what unpickling its dataset needs: Pillow's decoders must not cost it
    # torchvision's import.
    code = ("import sys; from labkit.datasets.pack_datasets import PackedDataset;"
            "from labkit.decode.registry import get_decoder; get_decoder('pil-reduced');"
            "print('torchvision' in sys.modules); get_decoder('torchvision'); print('torchvision' in sys.modules)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.split() == ["False", "True"]


def test_batched_jpeg_decode_matches_torchvision_decoder_on_cpu():
    from labkit.decode.backends import decode_jpeg_batch

    blobs = [torch.frombuffer(bytearray(_photo(index=k)), dtype=torch.uint8) for k in range(3)]
    batch = decode_jpeg_batch(blobs, 64, device="cpu")
    assert batch.shape == (3, 3, 64, 64) and batch.dtype == torch.uint8
    assert torch.equal(batch[1], decode_image(_photo(index=1), 64, "torchvision"))


def test_a_broken_file_in_a_batched_decode_is_named_by_its_position():
    from labkit.decode.backends import decode_jpeg_batch

    good = _photo()
    blobs = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in (good, good[: len(good) // 3], good)]
    with pytest.raises(DecodeError, match=r"batch item 1: .*bytes starting") as e:
        decode_jpeg_batch(blobs, 64, device="cpu")
    assert not _RUN_TO_RUN_NOISE.search(str(e.value)), str(e.value)


@pytest.mark.cuda
def test_batched_jpeg_decode_on_cuda_is_close_to_cpu():
    from labkit.decode.backends import decode_jpeg_batch

    blobs = [torch.frombuffer(bytearray(_photo(index=k)), dtype=torch.uint8) for k in range(4)]
    on_gpu = decode_jpeg_batch(blobs, 256, device="cuda").cpu()
    on_cpu = decode_jpeg_batch(blobs, 256, device="cpu")
    assert all(psnr(a, b) >= 30 for a, b in zip(on_gpu, on_cpu))


def test_without_torchcodec_its_decoder_is_unlisted_and_named_with_the_install(monkeypatch):
    from labkit.core.errors import LabkitError
    from labkit.decode import backends, registry

    monkeypatch.setattr(backends, "torchcodec_available", lambda: False)
    monkeypatch.setattr(registry, "DECODERS", {k: v for k, v in registry.DECODERS.items() if k != "torchcodec"})
    monkeypatch.setattr(registry, "MISSING", {"torchcodec": "pip install 'torch-labkit[torchcodec]'"})
    with pytest.raises(LabkitError, match=r"not installed here: pip install 'torch-labkit\[torchcodec\]'"):
        get_decoder("torchcodec")
    with pytest.raises(LabkitError, match=r"pip install 'torch-labkit\[torchcodec\]'"):
        backends.decode_torchcodec(_photo())
    with pytest.raises(LabkitError, match="choose one of pil, pil-reduced, torchvision, simplejpeg$"):
        get_decoder("turbo")
