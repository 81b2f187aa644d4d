#!/usr/bin/env bash
# Install the loaders the benchmarks measure labkit against into the kit's virtual environment (.venv, made by
# `make test` or `make lab`): WebDataset, MosaicML Streaming, LitData, DALI (the `peers` extra), FFCV and SPDL.
# FFCV builds from source against the system's libjpeg-turbo and OpenCV, so on Debian or Ubuntu this installs
# their headers first (apt-get, as root or through sudo); elsewhere install libjpeg-turbo and OpenCV 4 headers
# and pkg-config yourself. SPDL decodes with FFmpeg's shared libraries (5.1 to 8 on Linux), which the ffmpeg
# package pulls in. benchmarks/train_pipeline.py --install-peers runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="${VENV:-.venv}/bin/python -m pip"
if command -v apt-get >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libturbojpeg0-dev libopencv-dev pkg-config g++ ffmpeg
fi
$PIP install -e ".[peers]"
# FFCV's setup.py reads the headers' locations from pkg-config (opencv4, libturbojpeg).
$PIP install ffcv
$PIP install spdl
${VENV:-.venv}/bin/python -c "import ffcv, nvidia.dali, spdl.io, litdata, webdataset, streaming; print('peers import')"
