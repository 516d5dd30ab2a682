#!/usr/bin/env bash
# Install what is needed, build, and open vitlens on a real ViT and a photo.
#   model: $VITLENS_MODEL, else ../shared/models/deit-tiny (if present), else DeiT-Tiny
#          downloaded with scripts/download-model.sh
#   image: $1, else chelsea.png (../shared/images, or Debian's python3-skimage data)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --runtime
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"

model=${VITLENS_MODEL:-}; labels=${VITLENS_LABELS:-}
if [ -z "$model" ] && [ -f ../shared/models/deit-tiny/deit_tiny_patch16_224.safetensors ]; then
  model=../shared/models/deit-tiny/deit_tiny_patch16_224.safetensors
  labels=../shared/models/deit-tiny/imagenet_synset_words.txt
fi
if [ -z "$model" ]; then
  scripts/download-model.sh deit-tiny
  model=models/deit-tiny/model.safetensors; labels=models/deit-tiny/labels.txt
fi

image=${1:-}
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
