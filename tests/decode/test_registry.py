"""The decoder records: one per decoder, read by the rest of the kit; what is missing is named with its install."""

import pytest

from labkit.core.errors import LabkitError
from labkit.decode import registry
from labkit.decode.registry import DECODERS, decoder_info, decoder_table, get_decoder, preferred_decoder


def test_each_record_is_filed_under_its_name_and_simplejpeg_is_one():
    assert all(name == info.name for name, info in DECODERS.items())
    assert {"pil", "pil-reduced", "torchvision", "simplejpeg"} <= set(DECODERS)
    assert get_decoder("simplejpeg") is DECODERS["simplejpeg"].decode


def test_the_preferred_decoder_is_the_first_installed_of_the_preference(monkeypatch):
    assert preferred_decoder() == ("turbojpeg" if "turbojpeg" in DECODERS else "simplejpeg")
    monkeypatch.setattr(
        registry, "DECODERS", {k: v for k, v in DECODERS.items() if k not in ("simplejpeg", "turbojpeg")}
    )
    assert preferred_decoder() == "pil-reduced"


def test_the_records_say_which_decoders_crop_and_scale_in_the_decode():
    region = ["turbojpeg"] if "turbojpeg" in DECODERS else []  # where a libturbojpeg 3 loads
    assert [n for n, i in DECODERS.items() if i.crops_in_decode] == ["pil-reduced", "simplejpeg"] + region
    assert all(i.scales_in_decode == i.crops_in_decode for i in DECODERS.values())
    assert DECODERS["simplejpeg"].formats == {"JPEG"}


def test_a_decoder_not_installed_names_what_to_install(monkeypatch):
    monkeypatch.setattr(registry, "DECODERS", {k: v for k, v in DECODERS.items() if k != "simplejpeg"})
    monkeypatch.setattr(registry, "MISSING", {"simplejpeg": "pip install simplejpeg"})
    with pytest.raises(LabkitError, match="the simplejpeg decoder is not installed here: pip install simplejpeg"):
        decoder_info("simplejpeg")
    assert "simplejpeg   not installed: pip install simplejpeg" in decoder_table()


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(LabkitError, match="unknown decoder 'fast'; choose one of pil, pil-reduced"):
        decoder_info("fast")


def test_the_table_has_a_line_per_installed_decoder():
    lines = decoder_table().splitlines()
    assert [line.split()[0] for line in lines[: len(DECODERS)]] == list(DECODERS)
    assert "simplejpeg (libjpeg-turbo 3) + torch resize; DCT-scaled, crops in the decode" in decoder_table()


def test_only_torchcodec_comes_from_an_optional_extra():
    assert [n for n, i in DECODERS.items() if i.optional] == [n for n in ["torchcodec"] if n in DECODERS]


def test_no_decode_is_not_a_decoder_name():
    from labkit.decode.registry import NO_DECODE

    assert NO_DECODE not in registry.DECODERS
    with pytest.raises(LabkitError):
        registry.get_decoder(NO_DECODE)


def test_the_gpu_decoder_is_a_record_of_its_own_that_no_dataset_takes():
    import torch

    from labkit.decode.registry import DEVICE_DECODERS, device_decoder
    from labkit.decode.torch_decoders import decode_jpeg_batch

    assert "nvjpeg" in DEVICE_DECODERS and "nvjpeg" not in DECODERS  # every loop over DECODERS stays on the CPU
    with pytest.raises(LabkitError, match="decodes a batch on a CUDA device after the loader"):
        decoder_info("nvjpeg")
    assert "nvjpeg       nvJPEG" in decoder_table()
    if torch.cuda.is_available():
        assert device_decoder("nvjpeg").decode_batch is decode_jpeg_batch
    else:
        with pytest.raises(LabkitError, match="the nvjpeg decoder needs a CUDA device"):
            device_decoder("nvjpeg")
    with pytest.raises(LabkitError, match="unknown device decoder 'nvdec'"):
        device_decoder("nvdec")
