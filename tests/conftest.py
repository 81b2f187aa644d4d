"""Shared fixtures: one small photo-like data set and its packs, made once per test session."""

from __future__ import annotations

import os

import pytest

from labkit.packing import pack_folder
from labkit.synthetic import PhotoSpec, make_photos

SMALL = PhotoSpec(n=24, classes=3, width=160, height=120, seed=7)
OUT = 32  # decoded size used across the tests


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("photos") / "photos")
    make_photos(root, SMALL, workers=1, progress=False)
    return root


@pytest.fixture(scope="session")
def encoded_pack(photos, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("packs") / "photos.pack")
    pack_folder(photos, path, workers=1, progress=False)
    return path


@pytest.fixture(scope="session")
def decoded_pack(photos, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("packs") / f"photos-{OUT}.pack")
    pack_folder(photos, path, decoded_size=OUT, workers=1, progress=False)
    return path


@pytest.fixture()
def corrupt_photos(tmp_path) -> str:
    """A data set with every corrupt kind, listed in its manifest."""
    root = str(tmp_path / "corrupt")
    spec = PhotoSpec(n=30, classes=3, width=96, height=72, seed=3, corrupt=0.3)
    make_photos(root, spec, workers=1, progress=False)
    return root


def files_under(root: str):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` compare the GPU path with the CPU path; they need a CUDA device."""
    import torch

    if torch.cuda.is_available():
        return
    no_cuda = pytest.mark.skip(reason="needs a CUDA device (run on a GPU machine)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(no_cuda)
