#!/usr/bin/env python3
"""Pack any ImageFolder into one file, then verify every checksum of the result.

    python data_scripts/pack_folder.py data/photos data/photos.pack
    python data_scripts/pack_folder.py data/photos data/photos-256.pack --decoded 256

Same as `labkit pack SRC DST [options]` followed by `labkit verify DST`.
"""

import sys

from labkit.tools.cli import build_parser, main

if __name__ == "__main__":
    argv = ["pack", *sys.argv[1:]]
    status = main(argv)
    sys.exit(status or main(["verify", build_parser().parse_args(argv).dst]))
