#!/usr/bin/env bash
# scripts/download-model.sh against a local stand-in for the Hugging Face hub: a
# python http.server serving <repo>/resolve/main/<file> made from the shared
# DeiT-Tiny. Checks the files land where the script says, the labels file has
# 1000 lines in index order, a second run downloads nothing, an unknown name and a
# missing file fail, and vitlens runs on what was downloaded.
#   test_download.sh VITLENS SHARED_DIR WORK_DIR        (exit 77: no shared model)
set -uo pipefail
app=$(realpath "$1") shared=$(realpath -m "$2") work=$(realpath -m "$3")
src="$(cd "$(dirname "$0")/../.." && pwd)"
deit=$shared/models/deit-tiny/deit_tiny_patch16_224.safetensors
words=$shared/models/deit-tiny/imagenet_synset_words.txt
[ -f "$deit" ] && [ -f "$words" ] || { echo "SKIP: $deit missing"; exit 77; }
fails=0
check() { if eval "$1"; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }

rm -rf "$work"; mkdir -p "$work/hub" "$work/models"
hub=$work/hub
repo=$hub/timm/deit_tiny_patch16_224.fb_in1k/resolve/main
mkdir -p "$repo" "$hub/google/vit-base-patch16-224/resolve/main"
ln -s "$deit" "$repo/model.safetensors"
echo '{"architecture": "deit_tiny_patch16_224", "num_classes": 1000}' > "$repo/config.json"
# id2label from the synset words, written out of order as JSON objects may be
/usr/bin/python3 - "$words" "$hub/google/vit-base-patch16-224/resolve/main/config.json" <<'PY'
import json, sys
names = [l.split(" ", 1)[1].strip() for l in open(sys.argv[1]) if l.strip()]
json.dump({"id2label": {str(i): names[i] for i in reversed(range(len(names)))}}, open(sys.argv[2], "w"))
PY

# a free port, then the server; stopped on exit
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
/usr/bin/python3 -m http.server "$port" --bind 127.0.0.1 --directory "$hub" >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
  sleep 0.1
done

export HF_ENDPOINT=http://127.0.0.1:$port VITLENS_MODELS_DIR=$work/models
dl="$src/scripts/download-model.sh"
out=$("$dl" deit-tiny 2>&1); rc=$?
echo "$out" | sed 's/^/     /'
d=$work/models/deit-tiny
check '[ $rc -eq 0 ]' "download-model.sh deit-tiny exits 0"
check 'cmp -s "$deit" "$d/model.safetensors"' "the weights arrive intact"
check '[ -s "$d/config.json" ] && [ "$(wc -l < "$d/labels.txt")" -eq 1000 ]' "config.json and 1000 labels"
check '[ "$(sed -n 282p "$d/labels.txt")" = "$(sed -n 282p "$words" | cut -d" " -f2-)" ]' \
  "labels in class-index order (line 282: $(sed -n 282p "$d/labels.txt"))"
check 'echo "$out" | grep -qF -- "--model $d/model.safetensors --labels $d/labels.txt"' \
  "it prints the vitlens command"
n=$(wc -l < "$work/server.log")
"$dl" deit-tiny >/dev/null 2>&1
check '[ "$(wc -l < "$work/server.log")" -eq "$n" ]' "a second run downloads nothing"
top=$("$app" --model "$d/model.safetensors" --labels "$d/labels.txt" --top 1 "$shared/images/chelsea.png")
check 'echo "$top" | grep -q " 28[1-5] "' "vitlens runs on the download: $top"

"$dl" no-such-model >/dev/null 2>&1
check '[ $? -eq 2 ]' "an unknown model name exits 2"
"$dl" deit-small >/dev/null 2>&1
check '[ $? -ne 0 ] && [ ! -e "$work/models/deit-small/model.safetensors" ]' \
  "a missing file on the hub fails and leaves no weights behind"
"$dl" | grep -q dino-vits16
check '[ $? -eq 0 ]' "without arguments it lists the models"

[ $fails -eq 0 ] && echo "download: all checks passed" || echo "download: $fails checks failed"
[ $fails -eq 0 ]
