#!/usr/bin/env bash
# Install what is needed, build, and open vitlens.
#   scripts/quickstart.sh                the built-in model (assets/default) on its demo
#                                        scenes: nothing to download; N steps through them
#   scripts/quickstart.sh IMAGE          the built-in model on IMAGE
#   scripts/quickstart.sh --deit [IMAGE] DeiT-Tiny (ImageNet) on IMAGE, else chelsea.png;
#                                        ../shared/models/deit-tiny if present, else
#                                        downloaded with scripts/download-model.sh
#   VITLENS_MODEL=PATH [VITLENS_LABELS=FILE] scripts/quickstart.sh [IMAGE]   any model
set -euo pipefail
cd "$(dirname "$0")/.."
deit=0
if [ "${1:-}" = "--deit" ]; then deit=1; shift; fi
scripts/install-deps.sh --runtime
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"

model=${VITLENS_MODEL:-}; labels=${VITLENS_LABELS:-}; image=${1:-}
if [ -z "$model" ] && [ "$deit" = 0 ]; then
  exec build/vitlens ${image:+"$image"}
fi

if [ -z "$model" ] && [ -f ../shared/models/deit-tiny/deit_tiny_patch16_224.safetensors ]; then
  model=../shared/models/deit-tiny/deit_tiny_patch16_224.safetensors
  labels=../shared/models/deit-tiny/imagenet_synset_words.txt
fi
if [ -z "$model" ]; then
  scripts/download-model.sh deit-tiny
  model=models/deit-tiny/model.safetensors; labels=models/deit-tiny/labels.txt
fi

skimage=/usr/lib/python3/dist-packages/skimage/data/chelsea.png
if [ -z "$image" ]; then
  if [ -f ../shared/images/chelsea.png ]; then image=../shared/images/chelsea.png
  else
    [ -f "$skimage" ] || { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-skimage; }
    image=$skimage
  fi
fi
exec build/vitlens --model "$model" ${labels:+--labels "$labels"} "$image"
