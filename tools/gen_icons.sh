#!/usr/bin/env bash
# Render the icon's PNGs from its SVG (data/icons/io.github.vitlens.vitlens.svg, written by
# hand) at the sizes the hicolor theme is installed at: 48, 128 and 256 px.
# The PNGs are committed (a few KB each), so that building or packaging vitlens needs no
# SVG renderer; run this after editing the SVG (test install_files checks they agree).
# Needs rsvg-convert (Debian: librsvg2-bin).
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/data/icons"
id=io.github.vitlens.vitlens
for px in 48 128 256; do
  rsvg-convert --width "$px" --height "$px" "$dir/$id.svg" --output "$dir/$id-$px.png"
  echo "$dir/$id-$px.png"
done
