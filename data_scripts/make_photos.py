#!/usr/bin/env python3
"""Make the course's photo-like data set offline: an ImageFolder of JPEGs (root/<class>/<n>.jpg).

    python data_scripts/make_photos.py --out data/photos --n 2000     # about 2 min on 2 cores
    python data_scripts/make_photos.py --out data/photos --n 20000    # the seed article's scale
    python data_scripts/make_photos.py --out data/hostile --corrupt 0.05 --cmyk 0.05 --png 0.05

Same as `labkit data`; every option is listed by `--help`.
"""

import sys

from labkit.tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["data", *sys.argv[1:]]))
