#!/usr/bin/env bash
# Opening a ViT-B/16 as .safetensors and as a .pth (docs/benchmarks.md, issue 26): writes
# torchvision's vit_b_16 (random weights) with torch.save, and the same tensors in timm's
# names as .safetensors, then times vit_load of each (bench_load, alternating runs).
# Usage: bench/load.sh [BUILD] [N]     (default build, 9 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; n=${2:-9}
dir=$build/bench/load; mkdir -p "$dir"
[ -f "$dir/vit_b_16.pth" ] || OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 - "$dir" <<'PY'
import json, pathlib, sys
import torch, torchvision
d = pathlib.Path(sys.argv[1])
sd = torchvision.models.vit_b_16().state_dict()
torch.save(sd, d / "vit_b_16.pth")
lay = json.loads(pathlib.Path("assets/layouts/torchvision.json").read_text())["tensors"]
out = {}
for role, pat in lay.items():
    for l in (range(12) if "{l}" in role else [0]):
        out[role.replace("{l}", str(l))] = sd[pat.replace("{l}", str(l))]
out["cls_token"] = out["cls_token"].reshape(1, 1, -1)
hdr, off, blobs = {}, 0, []
for k, v in out.items():
    b = v.contiguous().float().numpy().tobytes()
    hdr[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(d / "vit_b_16.safetensors", "wb") as f:
    f.write(len(h).to_bytes(8, "little") + h)
    for b in blobs:
        f.write(b)
PY
"$build/bench/bench_load" "$dir/vit_b_16.safetensors" "$dir/vit_b_16.pth" "$n"
