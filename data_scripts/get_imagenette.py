#!/usr/bin/env python3
"""Fetch the real Imagenette (10 ImageNet classes, fast.ai) where there is internet.

    python data_scripts/get_imagenette.py --root data/imagenette       # downloads about 330 MB
    python data_scripts/get_imagenette.py --offline                    # how to use your own data

Without internet, every lab works on `labkit data` (made offline) or on any ImageFolder
tree you already have; this script then explains how to point the kit at it.
"""

import argparse
import os
import sys

OFFLINE_HELP = """\
No download. Every labkit command and notebook takes any ImageFolder tree already on disk:

    root/<class name>/<image>.jpg      (one sub-folder per class; JPEG, PNG, ... any mix)

  labkit pack  ROOT data/mine.pack              # one verified file for mmap reads
  labkit pack  ROOT data/mine-256.pack --decoded 256
  labkit demo  --data ROOT                      # measure images/s on it

Or make the photo-like set offline:  labkit data --out data/photos
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="data/imagenette", help="download folder")
    parser.add_argument("--size", default="320px", choices=["full", "320px", "160px"])
    parser.add_argument("--offline", action="store_true", help="do not download; explain how to use local data")
    args = parser.parse_args(argv)
    if args.offline:
        print(OFFLINE_HELP)
        return 0
    from torchvision.datasets import Imagenette

    try:
        for split in ("train", "val"):
            Imagenette(args.root, split=split, size=args.size, download=True)
    except (OSError, RuntimeError) as e:  # no network, DNS failure, proxy refusal, bad archive
        print(f"Could not download Imagenette: {e}\n", file=sys.stderr)
        print(OFFLINE_HELP, file=sys.stderr)
        return 1
    folders = [os.path.join(args.root, d) for d in sorted(os.listdir(args.root)) if d.startswith("imagenette2")]
    for folder in folders:
        print(f"ImageFolder trees ready: {os.path.join(folder, 'train')} and {os.path.join(folder, 'val')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
