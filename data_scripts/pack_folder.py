#!/usr/bin/env python3
"""Pack any ImageFolder into one file, then verify every checksum of the result.

    python data_scripts/pack_folder.py data/photos data/photos.pack
    python data_scripts/pack_folder.py data/photos data/photos-256.pack --decoded 256

Same as `labkit pack SRC DST [options]` followed by `labkit verify DST`.
"""
import sys

from labkit.cli import main

if __name__ == "__main__":
    status = main(["pack", *sys.argv[1:]])
    if status == 0:
        positional = [a for a in sys.argv[1:] if not a.startswith("-")]
        status = main(["verify", positional[1]]) if len(positional) >= 2 else status
    sys.exit(status)
