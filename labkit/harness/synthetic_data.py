"""A photo-like, class-labelled JPEG data set made offline (ImageFolder layout).

Why not noise or flat shapes: decode cost and file size depend on image content. The
article's timings are for photos of about 200 KB at 800×600-ish; random noise compresses far
worse than photos and flat shapes far better, so either would make every measurement in
the labs wrong. The images here follow the dead-leaves model, the standard synthetic
stand-in for natural images: occluding shapes whose sizes follow a power law (which gives
the 1/f amplitude spectrum of photos), slow illumination changes, lens blur and sensor
grain. Each class has its own shape family and hue, so a small CNN can learn the labels.

Every image depends only on ``(seed, index)``: any subset can be (re)made in any order, in
parallel, with the same bytes.
"""

from __future__ import annotations

import colorsys
import io
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from labkit.core.atomic import clear_dead_temporaries_in, write_atomic
from labkit.core.disk_space import disk_full_error, is_disk_full, require_space
from labkit.core.environment import usable_cpus
from labkit.core.errors import LabkitValueError
from labkit.core.processes import ignore_interrupts, interrupts_deferred
from labkit.core.wording import count

SHAPE_FAMILIES = ("disk", "square", "triangle", "ring", "stripe")
MANIFEST_NAME = "labkit_manifest.json"
QUICK_COUNT = 256
GRAIN = 6.0  # sensor noise (std, in 8-bit levels): sets JPEG size near the article's ~200 KB at 800x600
CORRUPT_KINDS = ("truncated", "empty", "not-an-image")
_HTML = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n"


@dataclass(frozen=True)
class PhotoSpec:
    """What `make_photos` makes. Fractions pick, per image, a variant a later lab needs."""

    n: int = 2000
    classes: int = 10
    width: int = 800
    height: int = 600
    seed: int = 0
    quality: int = 90
    grayscale: float = 0.0  # JPEG in mode L
    cmyk: float = 0.0  # JPEG in mode CMYK
    png: float = 0.0  # RGBA PNG with a real alpha channel
    large: float = 0.0  # JPEG at large_width × large_height
    corrupt: float = 0.0  # truncated, zero-byte or not-an-image files, listed in the manifest
    large_width: int = 4000
    large_height: int = 3000

    def __post_init__(self) -> None:
        if self.n < 0 or self.classes < 1 or self.width < 8 or self.height < 8:
            raise LabkitValueError(f"need n >= 0, classes >= 1 and a size of at least 8x8, got {self}")
        fractions = [self.corrupt, self.png, self.grayscale, self.cmyk, self.large]
        if min(fractions) < 0 or sum(fractions) > 1:
            raise LabkitValueError(f"variant fractions must be >= 0 and sum to at most 1, got {fractions}")
        if not 1 <= self.quality <= 100:
            raise LabkitValueError(f"JPEG quality must be in 1..100, got {self.quality}")


def class_name(label: int, classes: int) -> str:
    """Folder name of a class: its number, shape family and hue, e.g. ``03-ring-h108``."""
    return f"{label:02d}-{SHAPE_FAMILIES[label % len(SHAPE_FAMILIES)]}-h{_class_hue(label, classes):03d}"


def _class_hue(label: int, classes: int) -> int:
    return int(round(360 * label / classes)) % 360


@dataclass(frozen=True)
class SamplePlan:
    """Which file image ``index`` becomes."""

    index: int
    label: int
    kind: str  # "rgb", "grayscale", "cmyk", "png", "large", or one of CORRUPT_KINDS
    relpath: str


def plan_sample(spec: PhotoSpec, index: int) -> SamplePlan:
    """The label, variant and relative path of image ``index`` — a pure function of spec and index."""
    label = index % spec.classes
    rng = np.random.default_rng([spec.seed, index, 1])
    u = rng.random()
    kind = "rgb"
    edge = 0.0
    for name, frac in (
        ("corrupt", spec.corrupt),
        ("png", spec.png),
        ("grayscale", spec.grayscale),
        ("cmyk", spec.cmyk),
        ("large", spec.large),
    ):
        edge += frac
        if u < edge:
            kind = name
            break
    if kind == "corrupt":
        kind = CORRUPT_KINDS[int(rng.integers(len(CORRUPT_KINDS)))]
    ext = ".png" if kind == "png" else ".jpg"
    return SamplePlan(index, label, kind, f"{class_name(label, spec.classes)}/{index:06d}{ext}")


def _hsv(h: float, s: float, v: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, min(max(s, 0.0), 1.0), min(max(v, 0.0), 1.0))
    return int(r * 255), int(g * 255), int(b * 255)


def _draw_shape(
    draw: ImageDraw.ImageDraw,
    family: str,
    x: float,
    y: float,
    r: float,
    angle: float,
    color: tuple[int, int, int],
    rng: np.random.Generator,
) -> None:
    if family == "disk":
        draw.ellipse([x - r, y - r, x + r, y + r], fill=color)
    elif family == "ring":
        draw.ellipse([x - r, y - r, x + r, y + r], outline=color, width=max(1, int(r / 3)))
    else:
        if family == "square":
            corners = [(-1, -1), (1, -1), (1, 1), (-1, 1)]
        elif family == "stripe":
            corners = [(-2.5, -0.4), (2.5, -0.4), (2.5, 0.4), (-2.5, 0.4)]
        else:  # triangle
            corners = [(0, -1.2), (1.1, 0.8), (-1.1, 0.8)]
        c, s = np.cos(angle), np.sin(angle)
        draw.polygon([(x + r * (c * px - s * py), y + r * (s * px + c * py)) for px, py in corners], fill=color)


def render_photo(label: int, classes: int, width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """A dead-leaves 'photo' of class ``label`` as an H×W×3 uint8 array."""
    hue = _class_hue(label, classes) / 360
    family = SHAPE_FAMILIES[label % len(SHAPE_FAMILIES)]
    scale = min(width, height) / 600

    # Background: a soft vertical gradient between two tones (sky over ground).
    top = np.array(_hsv(hue + rng.normal(0, 0.05), 0.25, 0.85), np.float32)
    bottom = np.array(_hsv(hue + 0.5 + rng.normal(0, 0.05), 0.35, 0.35), np.float32)
    t = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    img = Image.fromarray(((1 - t) * top + t * bottom).repeat(width, axis=1).astype(np.uint8), "RGB")

    # Dead leaves: p(r) ∝ r^-3 between r_min and r_max, sampled by inverting the CDF.
    draw = ImageDraw.Draw(img)
    r_min, r_max = 6 * scale, 0.45 * min(width, height)
    count = int(1600 * (width * height) / (800 * 600))
    u = rng.random(count)
    radii = (r_min**-2 - u * (r_min**-2 - r_max**-2)) ** -0.5
    xs, ys = rng.random(count) * width, rng.random(count) * height
    angles = rng.random(count) * np.pi
    own = rng.random(count) < 0.85  # 85 % of the leaves carry the class signal, the rest is clutter
    for k in range(count):
        if own[k]:
            shape, h = family, hue + rng.normal(0, 0.04)
        else:
            shape, h = SHAPE_FAMILIES[int(rng.integers(len(SHAPE_FAMILIES)))], rng.random()
        color = _hsv(h, rng.uniform(0.35, 0.95), rng.uniform(0.25, 1.0))
        _draw_shape(draw, shape, xs[k], ys[k], radii[k], angles[k], color, rng)

    # Optics and sensor: lens blur, slow illumination changes, then grain.
    img = img.filter(ImageFilter.SMOOTH)
    light = Image.fromarray((rng.random((4, 5)) * 255).astype(np.uint8), "L").resize((width, height), Image.BICUBIC)
    gain = 0.65 + 0.5 * np.asarray(light, np.float32)[:, :, None] / 255
    noise = rng.standard_normal((height, width, 1), dtype=np.float32) * GRAIN
    return np.clip(np.asarray(img, np.float32) * gain + noise, 0, 255).astype(np.uint8)


def _alpha_mask(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    cx, cy = rng.uniform(0.3, 0.7) * width, rng.uniform(0.3, 0.7) * height
    d = np.hypot((xx - cx) / width, (yy - cy) / height)
    return np.clip(255 * (1.2 - 2.5 * d), 0, 255).astype(np.uint8)


def encode_sample(spec: PhotoSpec, plan: SamplePlan) -> bytes:
    """The file bytes of one planned sample."""
    if plan.kind == "empty":
        return b""
    if plan.kind == "not-an-image":
        return _HTML
    rng = np.random.default_rng([spec.seed, plan.index, 2])
    w, h = (spec.large_width, spec.large_height) if plan.kind == "large" else (spec.width, spec.height)
    pixels = render_photo(plan.label, spec.classes, w, h, rng)
    buf = io.BytesIO()
    if plan.kind == "png":
        rgba = np.dstack([pixels, _alpha_mask(w, h, rng)])
        Image.fromarray(rgba, "RGBA").save(buf, "PNG", compress_level=1)
        return buf.getvalue()
    img = Image.fromarray(pixels, "RGB")
    if plan.kind == "grayscale":
        img = img.convert("L")
    elif plan.kind == "cmyk":
        img = img.convert("CMYK")
    img.save(buf, "JPEG", quality=spec.quality)
    data = buf.getvalue()
    if plan.kind == "truncated":
        return data[: len(data) * 2 // 5]
    return data


def _expected(spec: PhotoSpec, plan: SamplePlan) -> tuple[str, tuple[int, int]]:
    size = (spec.large_width, spec.large_height) if plan.kind == "large" else (spec.width, spec.height)
    return ("PNG" if plan.kind == "png" else "JPEG"), size


def is_intact(spec: PhotoSpec, plan: SamplePlan, path: str) -> bool:
    """Whether the file at ``path`` is what ``plan`` asks for (a reduced decode catches truncation)."""
    try:
        if plan.kind in CORRUPT_KINDS:
            return os.path.isfile(path) and (os.path.getsize(path) == 0) == (plan.kind == "empty")
        fmt, size = _expected(spec, plan)
        with Image.open(path) as img:
            if img.format != fmt or img.size != size:
                return False
            img.draft(img.mode, (size[0] // 8, size[1] // 8))
            img.load()
        return True
    except (OSError, SyntaxError, ValueError):
        return False


def _make_one(job: tuple[PhotoSpec, str, int]) -> tuple[SamplePlan, int]:
    """Make one planned sample unless it is there and intact: its plan and the bytes written (``-1``: kept)."""
    spec, out, index = job
    plan = plan_sample(spec, index)
    path = os.path.join(out, plan.relpath)
    if os.path.exists(path) and is_intact(spec, plan, path):
        return plan, -1
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = encode_sample(spec, plan)
    write_atomic(path, data, durable=False, tidy=False)  # resumable: a lost photo is made again
    return plan, len(data)


def _start_pool(workers: int) -> Any:
    """A pool of ``workers`` processes that leave Ctrl-C to this one (which terminates them)."""
    import multiprocessing as mp

    with interrupts_deferred():
        return mp.get_context().Pool(workers, initializer=ignore_interrupts)


def _require_room(out: str, spec: PhotoSpec) -> None:
    """Refuse a data set that cannot fit where it goes, from the size of its first photo and the photos
    still to make; the temporary files of a killed earlier run are removed first."""
    clear_dead_temporaries_in(out)
    plans = (plan_sample(spec, i) for i in range(spec.n))
    missing = [plan for plan in plans if not os.path.exists(os.path.join(out, plan.relpath))]
    if missing:
        each = len(encode_sample(spec, next((p for p in missing if p.kind == "rgb"), missing[0])))
        require_space(out, int(each * len(missing) * 1.25), f"{count(len(missing), 'image')} of about {each:,} bytes")


@dataclass
class MakeReport:
    """What `make_photos` did: how many files it wrote and kept, and which ones are corrupt on purpose."""

    root: str
    written: int = 0
    kept: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    corrupt: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        variants = ", ".join(f"{k}: {v}" for k, v in sorted(self.kinds.items()))
        return (
            f"{self.root}: {self.written} images written, {self.kept} kept as they were ({variants}); "
            f"manifest {MANIFEST_NAME}"
        )


def make_photos(
    out: str, spec: PhotoSpec = PhotoSpec(), workers: int | None = None, progress: bool = True
) -> MakeReport:
    """Make (or complete) the data set ``spec`` under ``out``, using every core.

    Files already there and intact are kept, so an interrupted run resumes; every file is
    written under a temporary name and renamed, so a killed run never leaves half an image.
    The manifest ``labkit_manifest.json`` records the spec and lists the corrupt files.
    """
    from tqdm.auto import tqdm

    os.makedirs(out, exist_ok=True)
    _require_room(out, spec)
    workers = max(1, min(workers or usable_cpus(), spec.n))
    jobs = [(spec, out, i) for i in range(spec.n)]
    report = MakeReport(out)
    bar = tqdm(
        total=spec.n, desc=f"labkit data {os.path.basename(out.rstrip(os.sep))}", unit=" images", disable=not progress
    )
    pool = _start_pool(workers) if workers > 1 else None
    results = pool.imap_unordered(_make_one, jobs, chunksize=4) if pool is not None else map(_make_one, jobs)
    nbytes = 0
    try:
        plans: list[SamplePlan] = []
        for plan, written in results:
            plans.append(plan)
            nbytes += max(0, written)
            report.written += written >= 0
            report.kept += written < 0
            report.kinds[plan.kind] = report.kinds.get(plan.kind, 0) + 1
            bar.update()
    except OSError as error:
        if is_disk_full(error):  # the photos written stay: they are whole, and the next run keeps them
            raise disk_full_error(out, nbytes) from None
        raise
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
            clear_dead_temporaries_in(out, quiet=True)  # the photos the stopped workers were writing
    plans.sort(key=lambda p: p.index)
    report.corrupt = [{"path": p.relpath, "kind": p.kind} for p in plans if p.kind in CORRUPT_KINDS]
    manifest = {
        "generator": "labkit.harness.synthetic_data",
        "spec": asdict(spec),
        "classes": [class_name(c, spec.classes) for c in range(spec.classes)],
        "kinds": report.kinds,
        "corrupt": report.corrupt,
    }
    write_atomic(os.path.join(out, MANIFEST_NAME), json.dumps(manifest, indent=1).encode())
    return report


def read_manifest(root: str) -> dict:
    """The manifest `make_photos` wrote under ``root``."""
    with open(os.path.join(root, MANIFEST_NAME), encoding="utf-8") as f:
        return json.load(f)


def radial_power_spectrum(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean power of an image's luminance at each spatial frequency (cycles per image, 0 to the
    corner): ``(frequencies, power)``, the curve `spectrum_slope` fits a line to on log-log axes."""
    gray = np.asarray(image, np.float64)
    if gray.ndim == 3:
        gray = gray @ np.array([0.299, 0.587, 0.114])
    gray = gray - gray.mean()
    power = np.abs(np.fft.fftshift(np.fft.fft2(gray))) ** 2
    h, w = gray.shape
    yy, xx = np.mgrid[0:h, 0:w]
    radius = np.hypot(yy - h / 2, xx - w / 2).astype(int)
    radial = np.bincount(radius.ravel(), power.ravel()) / np.maximum(np.bincount(radius.ravel()), 1)
    return np.arange(len(radial)), radial


def spectrum_slope(image: np.ndarray, f_min: int = 4, f_max: int = 200) -> float:
    """Slope of log power against log spatial frequency of an image's luminance.

    Photos sit near -2 (amplitude falling as 1/f; 1.88 ± 0.43 over 276 photographs in van der
    Schaaf & van Hateren 1996); white noise is 0. The dead-leaves model is chosen to reproduce
    it. A slope tells photos from noise, not from every drawing: a few flat shapes with hard
    edges can fall at a photo-like slope too (notebook 00 draws one).
    """
    f, radial = radial_power_spectrum(image)
    h, w = np.asarray(image).shape[:2]
    band = (f >= f_min) & (f <= min(f_max, min(h, w) // 2))
    return float(np.polyfit(np.log(f[band]), np.log(radial[band]), 1)[0])


@dataclass(frozen=True)
class ClipSpec:
    """Video-like clips: a camera panning across a dead-leaves scene, one JPEG per frame."""

    n: int = 64
    classes: int = 4
    frames: int = 16
    width: int = 320
    height: int = 240
    pan: int = 6  # pixels the camera moves per frame
    seed: int = 0
    quality: int = 90


def _make_clip(job: tuple[ClipSpec, str, int]) -> bool:
    spec, out, index = job
    label = index % spec.classes
    folder = os.path.join(out, class_name(label, spec.classes), f"clip{index:05d}")
    last = os.path.join(folder, f"frame{spec.frames - 1:03d}.jpg")
    if os.path.exists(last):
        return False
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng([spec.seed, index, 3])
    canvas = render_photo(label, spec.classes, spec.width + spec.pan * spec.frames, spec.height, rng)
    for t in range(spec.frames):  # the last frame is written last: its presence means the clip is whole
        buf = io.BytesIO()
        Image.fromarray(canvas[:, t * spec.pan : t * spec.pan + spec.width]).save(buf, "JPEG", quality=spec.quality)
        write_atomic(os.path.join(folder, f"frame{t:03d}.jpg"), buf.getvalue(), durable=False, tidy=False)
    return True


def make_clips(out: str, spec: ClipSpec = ClipSpec(), workers: int | None = None, progress: bool = True) -> str:
    """Make ``spec.n`` clips under ``out/<class>/clipNNNNN/frameTTT.jpg``; clips already complete are kept."""
    from tqdm.auto import tqdm

    os.makedirs(out, exist_ok=True)
    clear_dead_temporaries_in(out)
    jobs = [(spec, out, i) for i in range(spec.n)]
    workers = max(1, min(workers or usable_cpus(), spec.n or 1))
    if workers == 1:
        written = sum(tqdm(map(_make_clip, jobs), total=spec.n, desc="labkit data --clips", disable=not progress))
    else:
        pool = _start_pool(workers)
        try:
            written = sum(
                tqdm(
                    pool.imap_unordered(_make_clip, jobs),
                    total=spec.n,
                    desc="labkit data --clips",
                    disable=not progress,
                )
            )
        finally:
            pool.terminate()
            pool.join()
            clear_dead_temporaries_in(out, quiet=True)  # the frames the stopped workers were writing
    return (
        f"{out}: {spec.n} clips of {spec.frames} frames, {spec.width}x{spec.height} ({written} written by this run, "
        f"{spec.n - written} already there and complete)"
    )


@dataclass(frozen=True)
class HostileCase:
    """One awkward or broken input, and what a sound loader must do with it."""

    relpath: str
    what: str
    expect: str  # "load" (as RGB, EXIF applied), "error" (a named error) or "ignored" (not a sample)


def _png(img: Image.Image, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG", **kw)
    return buf.getvalue()


def _jpeg(img: Image.Image, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90, **kw)
    return buf.getvalue()


def make_hostile(out: str, seed: int = 0) -> list[HostileCase]:
    """Write the inputs real data sets contain sooner or later, in two classes, and list them.

    Each case says whether a sound loader loads it (as RGB, EXIF orientation applied), refuses
    it with a named error, or does not take it for a sample at all. The list is also written
    to ``hostile_manifest.json`` under ``out``.
    """
    photo = Image.fromarray(render_photo(0, 2, 160, 120, np.random.default_rng([seed, 0])))
    good = _jpeg(photo)
    bomb = bytearray(_jpeg(Image.new("RGB", (16, 16))))
    sof = bomb.index(b"\xff\xc0")
    bomb[sof + 5 : sof + 9] = (30000).to_bytes(2, "big") + (30000).to_bytes(2, "big")
    palette = photo.convert("P", palette=Image.ADAPTIVE)
    exif = Image.Exif()
    exif[0x0112] = 6
    gray16 = Image.fromarray(np.asarray(photo.convert("L"), np.uint16) * 257)
    files = [
        ("a/photo.jpg", good, "a normal photo", "load"),
        ("a/truncated.jpg", good[: len(good) // 3], "a JPEG cut short", "error"),
        ("a/empty.jpg", b"", "a zero-byte file", "error"),
        ("a/error-page.jpg", _HTML, "an HTML error page saved as .jpg", "error"),
        ("a/cmyk.jpg", _jpeg(photo.convert("CMYK")), "a CMYK JPEG", "load"),
        ("a/gray16.png", _png(gray16), "a 16-bit grayscale PNG", "load"),
        ("a/palette-transparent.png", _png(palette, transparency=0), "a palette PNG with transparency", "load"),
        ("a/rgba.png", _png(photo.convert("RGBA")), "an RGBA PNG", "load"),
        ("b/one-pixel.png", _png(Image.new("RGB", (1, 1), (200, 10, 10))), "a 1x1 image", "load"),
        ("b/bomb.jpg", bytes(bomb), "a header claiming 30000x30000 pixels", "error"),
        ("b/rotated.jpg", _jpeg(photo, exif=exif), "a photo with EXIF orientation 6", "load"),
        ("b/" + "long-" * 46 + "name.jpg", good, "a 238-byte file name", "load"),
    ]
    cases = []
    for relpath, data, what, expect in files:
        path = os.path.join(out, relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, data)
        cases.append(HostileCase(relpath, what, expect))
    latin1 = os.path.join(os.fsencode(out), b"b", b"caf\xe9-latin1.jpg")  # not valid UTF-8
    with open(latin1, "wb") as f:
        f.write(good)
    cases.append(HostileCase(os.fsdecode(os.path.relpath(latin1, os.fsencode(out))), "a non-UTF-8 file name", "load"))
    loop = os.path.join(out, "b", "loop.jpg")
    if not os.path.lexists(loop):
        os.symlink("loop.jpg", loop)  # points at itself
    cases.append(HostileCase("b/loop.jpg", "a symlink loop", "error"))
    locked = os.path.join(out, "b", "unreadable.jpg")
    write_atomic(locked, good)
    os.chmod(locked, 0)
    cases.append(
        HostileCase(
            "b/unreadable.jpg",
            "a file without read permission (root reads it anyway)",
            "load" if os.geteuid() == 0 else "error",
        )
    )
    os.makedirs(os.path.join(out, "b", "folder.jpg"), exist_ok=True)
    cases.append(HostileCase("b/folder.jpg", "a directory named like an image", "ignored"))
    write_atomic(os.path.join(out, "hostile_manifest.json"), json.dumps([asdict(c) for c in cases], indent=1).encode())
    return cases
