"""labkit.decode.center_crop: torchvision's Resize(256) + CenterCrop(224), found before the decode."""

import io

import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from labkit.core.errors import LabkitValueError
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.decode.center_crop import CenterCrop
from labkit.decode.registry import DECODERS, decode_image
from labkit.decode.resize import psnr


def _photo(width, height):
    y, x = torch.meshgrid(torch.linspace(0, 1, height), torch.linspace(0, 1, width), indexing="ij")
    pixels = torch.stack([x * 255, y * 255, (x * y * 8).sin().abs() * 255]).to(torch.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels.permute(1, 2, 0).numpy()).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def _torchvision(data, size, resize):
    return v2.Compose([v2.Resize(resize, antialias=True), v2.CenterCrop(size)])(decode_image(data, None, "pil"))


@pytest.mark.parametrize("decoder", sorted(DECODERS))
@pytest.mark.parametrize("width,height", [(800, 600), (600, 800), (300, 256), (257, 1000)])
def test_the_centre_crop_is_torchvision_s_evaluation_transform(decoder, width, height):
    data = _photo(width, height)
    ours = CenterCrop(224, resize=256).decode(data, decoder=decoder)
    assert ours.shape == (3, 224, 224)
    assert psnr(ours, _torchvision(data, 224, 256)) >= 30


def test_a_rectangular_crop_and_the_box_inside_the_image():
    data = _photo(640, 480)
    ours = CenterCrop((160, 224), resize=256).decode(data)
    assert ours.shape == (3, 160, 224) and psnr(ours, _torchvision(data, (160, 224), 256)) >= 30
    box = CenterCrop(224, 224).draw(480, 640)
    # torchvision resizes 640x480 to 298x224 (int() of the long side) and keeps columns 37..261: 79.3.. in the photo
    assert (box.height, box.width) == (480, 480) and box.left == 79 and box.top == 0 and not box.flip


def test_bad_sizes_are_refused():
    for bad in (dict(size=224, resize=200), dict(size=224, resize=256.0), dict(size=None)):
        with pytest.raises(LabkitValueError):
            CenterCrop(**bad)


def test_a_dataset_with_a_centre_crop_gives_the_same_image_every_epoch(photos):
    dataset = ImageFolderDataset(photos, decoder="pil-reduced", crop=CenterCrop(24, resize=28))
    first, again = dataset[3][0], dataset[3][0]
    dataset.set_epoch(5)
    assert first.shape == (3, 24, 24) and torch.equal(first, again) and torch.equal(first, dataset[3][0])
    assert "centre crops" in repr(dataset)
    with pytest.raises(LabkitValueError, match="the crop's size .* is the output; leave size= out"):
        ImageFolderDataset(photos, size=128, crop=CenterCrop(24, resize=28))
