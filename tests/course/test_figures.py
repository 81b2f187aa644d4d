import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from labkit.course.figures import jpeg_bytes, show_as_jpeg  # noqa: E402


def _photo_grid():
    fig, axes = plt.subplots(2, 4, figsize=(8, 4), dpi=60)
    rng = np.random.default_rng(0)
    for ax in axes.flat:
        ax.imshow(rng.integers(0, 255, (128, 128, 3), dtype=np.uint8))
    return fig


def test_a_photo_grid_as_jpeg_keeps_its_pixel_size_and_is_far_smaller_than_png():
    fig = _photo_grid()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=fig.dpi)
    jpeg = jpeg_bytes(fig)
    assert Image.open(io.BytesIO(jpeg)).format == "JPEG"
    assert Image.open(io.BytesIO(jpeg)).size == Image.open(io.BytesIO(png.getvalue())).size == (480, 240)
    assert len(jpeg) < len(png.getvalue()) / 2
    plt.close(fig)


def test_show_as_jpeg_displays_one_jpeg_and_closes_the_figure(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    fig = _photo_grid()
    show_as_jpeg(fig)
    assert len(shown) == 1 and shown[0].format == "jpeg" and shown[0].data[:2] == b"\xff\xd8"
    assert not plt.fignum_exists(fig.number)
