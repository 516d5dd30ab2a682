#!/usr/bin/env bash
# Install what vitlens needs to build, run and test, from Debian's packages.
# Usage: scripts/install-deps.sh [--runtime]   (--runtime: build + app only, no test tools)
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

build=(build-essential cmake pkg-config
       libopenblas-dev liblapacke-dev libcjson-dev libstb-dev
       libzip-dev  # PyTorch checkpoints (.pth: a zip), engine/load/pth.c
       zlib1g-dev libpcre2-dev libicu-dev  # CLIP's tokenizer: its .gz vocabulary, split, lower-casing
       libsentencepiece-dev  # SigLIP's tokenizer (engine/text/spiece.c, C++: g++ from build-essential)
       libjpeg-dev libwebp-dev libtiff-dev libheif-dev libexif-dev  # image decoders (engine/image/codecs.c)
       libsdl2-dev libsdl2-ttf-dev libepoxy-dev libfontconfig-dev fonts-dejavu-core libgl1-mesa-dri
       # video files and cameras (app/media/): GStreamer, its appsink and video converter, and
       # the decoders: base (Ogg/Theora, videotestsrc), good (v4l2src, Matroska/WebM, MP4,
       # VP8/VP9), libav (H.264, HEVC, MPEG-4: most .mp4 files)
       libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
       gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-libav
       curl)  # scripts/download-model.sh
# Tests: the PyTorch reference (Debian's python3-torch, run with /usr/bin/python3),
# the GUI tests under Xvfb, clang with libFuzzer (libclang-rt-14-dev ships
# libclang_rt.fuzzer) for tests/fuzz, valgrind for the memcheck tests, and the packaging
# tools for tests/install.
tests=(python3-torch python3-numpy python3-pil python3-torchvision python3-networkx
       python3-scipy  # tests/eval: --agreement's Spearman against scipy.stats.spearmanr
       python3-regex  # tests/text: CLIP's tokenizer's reference (its split pattern)
       python3-sentencepiece python3-protobuf  # tests/text: SigLIP's tokenizer's reference, its model trained
       python3-onnx  # bench/run.sh: the models exported for ONNX Runtime (bench/onnx_export.py)
       xvfb xauth xdotool x11-utils imagemagick clang-format
       clang libclang-rt-14-dev valgrind
       gdb  # tests/gui: a window test that times out prints the app's threads' stacks
       strace  # tests/gui/test_fork.py: the order of the launch's threads and forks
       libheif-examples  # heif-enc / heif-convert: HEIC and AVIF by hand (the tests encode their own)
       gstreamer1.0-tools  # gst-launch-1.0: tests/media encode their own videos and decode them to PNGs
       xfonts-base  # X core fonts: SDL's X11 message box (start-up errors) needs them
       parallel  # GNU parallel: the README's sharded --eval, run by tests/eval
       # tests/install: cpack's DEB generator (dpkg-shlibdeps), the desktop file's, AppStream
       # metainfo's and the man page's validators, the icon's SVG renderer
       dpkg-dev desktop-file-utils appstream man-db groff-base librsvg2-bin)

pkgs=("${build[@]}")
[ "${1:-}" = "--runtime" ] || pkgs+=("${tests[@]}")
# bench/run.sh's ONNX Runtime column (npm's onnxruntime-node): Debian's nodejs and npm, unless
# a node and npm are already there (e.g. NodeSource's nodejs, which ships npm and conflicts)
if [ "${1:-}" != "--runtime" ] && ! { command -v node && command -v npm; } >/dev/null; then
  pkgs+=(nodejs npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
