import io
import os

import numpy as np
import pytest
from conftest import SMALL, files_under
from PIL import Image

from labkit.decode.decoder_contract import DecodeError
from labkit.decode.pil_decoders import decode_pil
from labkit.harness.synthetic_data import (
    CORRUPT_KINDS,
    MANIFEST_NAME,
    PhotoSpec,
    class_name,
    encode_sample,
    make_photos,
    plan_sample,
    read_manifest,
    spectrum_slope,
)


def _contents(root):
    return {rel: open(os.path.join(root, rel), "rb").read() for rel in files_under(root) if rel != MANIFEST_NAME}


def test_imagefolder_layout_balanced_classes_and_manifest(photos):
    files = [f for f in files_under(photos) if f != MANIFEST_NAME]
    assert len(files) == SMALL.n
    classes = sorted({f.split(os.sep)[0] for f in files})
    assert classes == [class_name(c, SMALL.classes) for c in range(SMALL.classes)]
    assert all(sum(f.startswith(c) for f in files) == SMALL.n // SMALL.classes for c in classes)
    manifest = read_manifest(photos)
    assert manifest["spec"]["n"] == SMALL.n and manifest["corrupt"] == []


def test_same_seed_same_bytes_in_parallel_or_not(tmp_path, photos):
    again = str(tmp_path / "again")
    make_photos(again, SMALL, workers=2, progress=False)
    assert _contents(again) == _contents(photos)
    other = str(tmp_path / "other")
    make_photos(other, PhotoSpec(n=3, classes=3, width=160, height=120, seed=8), workers=1, progress=False)
    first = files_under(other)[0]
    assert _contents(other)[first] != _contents(photos)[first]


def test_rerun_keeps_intact_files_and_remakes_damaged_ones(tmp_path):
    spec = PhotoSpec(n=6, classes=2, width=64, height=48)
    root = str(tmp_path / "d")
    make_photos(root, spec, workers=1, progress=False)
    victim = os.path.join(root, plan_sample(spec, 3).relpath)
    good = open(victim, "rb").read()
    with open(victim, "r+b") as f:
        f.truncate(len(good) // 2)
    mtimes = {rel: os.stat(os.path.join(root, rel)).st_mtime_ns for rel in files_under(root)}
    report = make_photos(root, spec, workers=1, progress=False)
    assert (report.written, report.kept) == (1, 5)
    assert open(victim, "rb").read() == good
    kept = [rel for rel in mtimes if rel != MANIFEST_NAME and os.path.join(root, rel) != victim]
    assert all(os.stat(os.path.join(root, rel)).st_mtime_ns == mtimes[rel] for rel in kept)


def test_full_size_images_are_photo_like():
    spec = PhotoSpec(n=4)
    sizes, slopes = [], []
    for i in range(4):
        data = encode_sample(spec, plan_sample(spec, i))
        sizes.append(len(data))
        slopes.append(spectrum_slope(np.asarray(Image.open(io.BytesIO(data)))))
    # The seed's photos: about 200 KB at 800x600-ish, quality 90; natural images: power ~ 1/f^2.
    assert 120_000 < np.mean(sizes) < 320_000, sizes
    assert all(-3.3 < s < -1.5 for s in slopes), slopes
    noise = np.random.default_rng(0).integers(0, 256, (600, 800), dtype=np.uint8)
    assert abs(spectrum_slope(noise)) < 0.3  # the statistic tells noise from photos


def _colour_histogram(data: bytes) -> np.ndarray:
    rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")) // 64  # 4 levels per channel
    hist = np.bincount((rgb[..., 0] * 16 + rgb[..., 1] * 4 + rgb[..., 2]).ravel(), minlength=64)
    return hist / hist.sum()


def test_classes_are_learnable_from_colour_alone():
    # Far weaker than a CNN: a nearest-centroid rule on colour histograms, trained on 60 images.
    spec = PhotoSpec(n=100, classes=10, width=400, height=300, seed=1)
    plans = [plan_sample(spec, i) for i in range(spec.n)]
    features = np.stack([_colour_histogram(encode_sample(spec, p)) for p in plans])
    labels = np.array([p.label for p in plans])
    train, test = slice(0, 60), slice(60, None)
    centroids = np.stack([features[train][labels[train] == c].mean(0) for c in range(spec.classes)])
    predicted = np.argmin(((features[test][:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    accuracy = (predicted == labels[test]).mean()
    assert accuracy >= 0.75, accuracy  # chance: 0.1


def test_variants_have_the_modes_they_claim(tmp_path):
    spec = PhotoSpec(
        n=40,
        classes=2,
        width=64,
        height=48,
        grayscale=0.2,
        cmyk=0.2,
        png=0.2,
        large=0.1,
        large_width=320,
        large_height=240,
    )
    root = str(tmp_path / "v")
    report = make_photos(root, spec, workers=1, progress=False)
    expected_mode = {"rgb": "RGB", "grayscale": "L", "cmyk": "CMYK", "png": "RGBA", "large": "RGB"}
    for i in range(spec.n):
        plan = plan_sample(spec, i)
        with Image.open(os.path.join(root, plan.relpath)) as img:
            assert img.mode == expected_mode[plan.kind], plan
            assert img.size == ((320, 240) if plan.kind == "large" else (64, 48))
    assert set(report.kinds) == set(expected_mode)


def test_corrupt_files_are_listed_and_really_corrupt(corrupt_photos):
    corrupt = read_manifest(corrupt_photos)["corrupt"]
    assert corrupt and {c["kind"] for c in corrupt} <= set(CORRUPT_KINDS)
    for entry in corrupt:
        with pytest.raises(DecodeError):
            decode_pil(open(os.path.join(corrupt_photos, entry["path"]), "rb").read(), 32)


def test_bad_specs_are_refused():
    with pytest.raises(ValueError):
        PhotoSpec(grayscale=0.7, cmyk=0.5)
    with pytest.raises(ValueError):
        PhotoSpec(quality=0)


def test_radial_power_spectrum_is_what_the_slope_is_fitted_to():
    from labkit.harness.synthetic_data import radial_power_spectrum

    spec = PhotoSpec(n=1, width=320, height=240)
    image = np.asarray(Image.open(io.BytesIO(encode_sample(spec, plan_sample(spec, 0)))))
    f, power = radial_power_spectrum(image)
    assert f[0] == 0 and np.all(np.diff(f) == 1) and len(f) == len(power) and power[0] < 1e-6 * power[1]
    band = (f >= 4) & (f <= 120)
    fitted = np.polyfit(np.log(f[band]), np.log(power[band]), 1)[0]
    assert fitted == pytest.approx(spectrum_slope(image, 4, 120))
    noise = np.random.default_rng(0).normal(size=(240, 320))
    _, flat = radial_power_spectrum(noise)
    assert np.std(np.log(flat[4:120])) < 0.5  # white noise: the same power at every frequency
