#!/usr/bin/env bash
# scripts/download-model.sh against a local stand-in for the Hugging Face hub: a
# python http.server serving <repo>/resolve/main/<file> made from the shared
# DeiT-Tiny. Checks the files land where the script says, the labels file has
# 1000 lines in index order, a second run downloads nothing, an unknown name and a
# missing file fail, and vitlens runs on what was downloaded. Then the other
# families (DeiT distilled, DINO, DINOv2 with and without registers, DINOv2 in
# transformers' own names, and EVA-02 Ti in timm's, test_eva02.py): the hub serves small random-weight checkpoints of each family
# in timm's names (tests/parity/test_families.py; test_hf_dinov2.py for transformers')
# under the repositories the script should ask
# for; each request must hit exactly those, each download must run in vitlens. Among them
# an fc_norm classifier (EVA-L/14, timm's average-pooled head). DINOv3 is gated: the
# stand-in hub (hub_server.py) answers 401 without the right token; without HF_TOKEN the
# script must say so and ask for nothing, with it send it to that repository alone.
#   test_download.sh VITLENS SHARED_DIR WORK_DIR        (exit 77: no shared model)
# No `echo "$x" | grep -q`: under pipefail, grep -q leaving early fails the echo
# (SIGPIPE) when the text is long; checks read a here-string instead.
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
HUB_TOKEN=hf_test_token /usr/bin/python3 "$src/tests/scripts/hub_server.py" "$port" "$hub" \
  "$work/auth.log" facebook/dinov3-vits16-pretrain-lvd1689m >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 600); do  # up to 60 s: the server starts slowly on a busy machine
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
check 'grep -qF -- "--model $d/model.safetensors --labels $d/labels.txt" <<<"$out"' \
  "it prints the vitlens command"
n=$(wc -l < "$work/server.log")
"$dl" deit-tiny >/dev/null 2>&1
check '[ "$(wc -l < "$work/server.log")" -eq "$n" ]' "a second run downloads nothing"
top=$("$app" --model "$d/model.safetensors" --labels "$d/labels.txt" --top 1 "$shared/images/chelsea.png")
check 'grep -q " 28[1-5] " <<<"$top"' "vitlens runs on the download: $top"

# --user, and a copy of the script outside the source tree: the XDG folder; vitlens
# finds the download by name there, with its labels
xdg=$work/xdg home=$work/home
out=$(env -u VITLENS_MODELS_DIR XDG_DATA_HOME="$xdg" "$dl" --user deit-tiny 2>&1); rc=$?
d=$xdg/vitlens/models/deit-tiny
check '[ $rc -eq 0 ] && cmp -s "$deit" "$d/model.safetensors" && [ -s "$d/labels.txt" ]' \
  "--user: into \$XDG_DATA_HOME/vitlens/models"
check 'grep -qF -- "--model deit-tiny IMAGE" <<<"$out"' "it prints the vitlens command by name"
mkdir -p "$work/copy/scripts"; cp "$dl" "$work/copy/scripts/"
env -u VITLENS_MODELS_DIR -u XDG_DATA_HOME HOME="$home" "$work/copy/scripts/download-model.sh" \
  deit-tiny >/dev/null 2>&1
check 'cmp -s "$deit" "$home/.local/share/vitlens/models/deit-tiny/model.safetensors"' \
  "a copy outside the source tree: into ~/.local/share/vitlens/models"
top=$(cd "$work" && env -u VITLENS_MODELS_DIR XDG_DATA_HOME="$xdg" HOME="$home" \
  "$app" --model deit-tiny --top 1 "$shared/images/chelsea.png" 2>&1)
check 'grep -q "^1 0\.[0-9]* 28[1-5] [A-Za-z]" <<<"$top"' "vitlens --model deit-tiny, labels included: $top"
top=$(cd "$work" && env -u VITLENS_MODELS_DIR -u XDG_DATA_HOME HOME="$home" \
  "$app" --model deit-tiny --top 1 "$shared/images/chelsea.png" 2>&1)
check 'grep -q "^1 0\.[0-9]* 28[1-5] [A-Za-z]" <<<"$top"' "and from ~/.local/share: $top"
top=$(cd "$work" && env -u VITLENS_MODELS_DIR XDG_DATA_HOME="$xdg" HOME="$home" \
  "$app" --model deit-huge --top 1 "$shared/images/chelsea.png" 2>&1); rc=$?
check '[ $rc -eq 1 ] && grep -qF "$xdg/vitlens/models" <<<"$top" && grep -q "downloaded: deit-tiny" <<<"$top"' \
  "an unknown name exits 1 naming the places and the models: $top"

"$dl" no-such-model >/dev/null 2>&1
check '[ $? -eq 2 ]' "an unknown model name exits 2"
"$dl" deit-small >/dev/null 2>&1
check '[ $? -ne 0 ] && [ ! -e "$work/models/deit-small/model.safetensors" ]' \
  "a missing file on the hub fails and leaves no weights behind"
list=$("$dl" 2>&1)
check 'grep -q dino-vits16 <<<"$list"' "without arguments it lists the models"

# --- the other families: the requests the script makes, and vitlens on each download
declare -A FAMILY=(  # name -> "hub repository|stand-in family in test_families.py|classifier"
  [deit-tiny-distilled]="timm/deit_tiny_distilled_patch16_224.fb_in1k|deit_distilled_timm|1"
  [deit-small-distilled]="timm/deit_small_distilled_patch16_224.fb_in1k|deit_distilled_timm|1"
  [deit-base-distilled]="timm/deit_base_distilled_patch16_224.fb_in1k|deit_distilled_timm|1"
  [vit-base-augreg]="timm/vit_base_patch16_224.augreg2_in21k_ft_in1k|vit_timm|1"
  [dino-vits16]="timm/vit_small_patch16_224.dino|vit_timm|0"
  [dino-vits8]="timm/vit_small_patch8_224.dino|dino_timm_p8|0"
  [dino-vitb16]="timm/vit_base_patch16_224.dino|vit_timm|0"
  [dinov2-vits14]="timm/vit_small_patch14_dinov2.lvd142m|dinov2_timm|0"
  [dinov2-vits14-reg4]="timm/vit_small_patch14_reg4_dinov2.lvd142m|dinov2_reg4_timm|0"
  [dinov2-small-hf]="facebook/dinov2-small|hf_dinov2|0"
  [eva02-tiny]="timm/eva02_tiny_patch14_336.mim_in22k_ft_in1k|eva02|1"
  [eva-vitl14-196]="timm/eva_large_patch14_196.in22k_ft_in22k_in1k|fcnorm_avg_timm|1"
)
# a stand-in of each family: 1000 classes for classifiers (the labels), none for backbones
OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 - "$src/tests/parity" "$hub" "${FAMILY[@]}" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_families as tf
import test_hf_dinov2 as hd
import test_eva02 as te
for entry in sys.argv[3:]:
    repo, fam, cls = entry.split("|")
    if fam == "eva02":  # timm's eva02_* names (test_eva02.py), small, with fc_norm and a head
        c = dict(shape="Ti", file="safetensors", size=(28, 28), C=1000, D=64, L=1, H=1, F=128,
                 split=False)
        te.write_case(c, Path(sys.argv[2]) / repo / "resolve/main", seed=1)
        continue
    if fam == "hf_dinov2":  # transformers' Dinov2Model names (test_hf_dinov2.py), small
        c = dict(hd.SMALL, D=64, L=1, H=1, F=128, C=0, R=0, cls="Dinov2Model", file="safetensors")
        hd.write_case(c, Path(sys.argv[2]) / repo / "resolve/main", seed=1)
        continue
    f = tf.spec(fam)
    f["C"] = 1000 if cls == "1" else 0
    tf.write_family(f, Path(sys.argv[2]) / repo / "resolve/main", seed=1)
PY
n0=$(wc -l < "$work/server.log")
names=$(printf '%s\n' "${!FAMILY[@]}" | sort)
out=$("$dl" $names 2>&1); rc=$?
check '[ $rc -eq 0 ]' "download-model.sh $(echo $names) exits 0"
got=$(tail -n +"$((n0 + 1))" "$work/server.log" | grep -o '"GET [^ ]*' | cut -c6- | sort)
want=$(for name in $names; do
  IFS='|' read -r repo fam cls <<<"${FAMILY[$name]}"
  echo "/$repo/resolve/main/model.safetensors"; echo "/$repo/resolve/main/config.json"
  [ "$cls" = 1 ] && echo "/google/vit-base-patch16-224/resolve/main/config.json"
done | sort)
check '[ "$got" = "$want" ]' "it asks the hub for exactly the families' repositories ($(echo "$got" | grep -c model.safetensors) models)"
[ "$got" = "$want" ] || diff <(echo "$want") <(echo "$got") | sed 's/^/     /'
photo=$work/photo.png
/usr/bin/python3 -c "from PIL import Image; Image.new('RGB', (320, 240), (200, 80, 40)).save('$photo')"
for name in $names; do
  IFS='|' read -r repo fam cls <<<"${FAMILY[$name]}"
  d=$work/models/$name
  check 'cmp -s "$hub/$repo/resolve/main/model.safetensors" "$d/model.safetensors" && [ -s "$d/config.json" ]'     "$name: the weights and config.json arrive"
  if [ "$cls" = 1 ]; then
    check '[ "$(wc -l < "$d/labels.txt")" -eq 1000 ]' "$name: 1000 labels"
    top=$("$app" --model "$d/model.safetensors" --labels "$d/labels.txt" --top 1 "$photo" 2>&1)
    check 'grep -q "^1 " <<<"$top"' "$name: vitlens --top 1 runs: $top"
  else
    check '[ ! -e "$d/labels.txt" ]' "$name: a backbone, no labels"
    size=; case $name in dinov2-*) size="--size 224" ;; esac
    check 'grep -qF -- "--model $d/model.safetensors $size" <<<"$out"' "$name: it prints the command${size:+ with $size}"
    exp=$("$app" --model "$d/model.safetensors" $size --export "$work/export-$name" "$photo" 2>&1)
    check 'grep -q "^wrote " <<<"$exp"' "$name: vitlens --export runs: $exp"
  fi
done

# --- CLIP (issue 27): OpenAI's in Hugging Face names with their tokenizer files, OpenCLIP's in
# OpenAI names; tiny random stand-ins (tests/gui/clip_models.py) with the real vocabulary
vocab_gz=$shared/clip/bpe_simple_vocab_16e6.txt.gz
declare -A CLIPS=(  # name -> "hub repository|naming scheme"
  [clip-vit-b32]="openai/clip-vit-base-patch32|hf"
  [clip-vit-b16]="openai/clip-vit-base-patch16|hf"
  [openclip-vit-b32-laion2b]="laion/CLIP-ViT-B-32-laion2B-s34B-b79K|openai"
)
if [ -f "$vocab_gz" ]; then
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 - "$src/tests/gui" "$hub" "$vocab_gz" "${CLIPS[@]}" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import clip_models as cm
for entry in sys.argv[4:]:
    repo, scheme = entry.split("|")
    d = Path(sys.argv[2]) / repo / "resolve/main"
    cm.write(d, scheme, seed=2)
    cm.write_hf_vocab(sys.argv[3], d)
    if scheme == "hf":
        (d / "preprocessor_config.json").write_text(json.dumps({
            "crop_size": cm.SHAPE["S"], "do_center_crop": True, "do_resize": True,
            "size": cm.SHAPE["S"], "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3}))
    else:  # OpenCLIP's own file names; its repository's config.json is the HF copy's
        (d / "model.safetensors").rename(d / "open_clip_model.safetensors")
        (d / "open_clip_config.json").write_text(json.dumps({"model_cfg": {
            "embed_dim": cm.SHAPE["E"], "quick_gelu": True,
            "vision_cfg": {"image_size": cm.SHAPE["S"], "layers": cm.SHAPE["LV"],
                           "width": cm.SHAPE["D"], "patch_size": cm.SHAPE["P"]},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": cm.SHAPE["W"],
                         "heads": cm.SHAPE["HT"], "layers": cm.SHAPE["LT"]}}}))
        (d / "config.json").write_text("{}")
PY
  n0=$(wc -l < "$work/server.log")
  names=$(printf '%s\n' "${!CLIPS[@]}" | sort)
  out=$("$dl" $names 2>&1); rc=$?
  check '[ $rc -eq 0 ]' "download-model.sh $(echo $names) exits 0"
  got=$(tail -n +"$((n0 + 1))" "$work/server.log" | grep -o '"GET [^ ]*' | cut -c6- | sort)
  want=$(for name in $names; do
    IFS='|' read -r repo scheme <<<"${CLIPS[$name]}"
    if [ "$scheme" = hf ]; then files="model.safetensors config.json preprocessor_config.json"
    else files="open_clip_model.safetensors open_clip_config.json"; fi
    for f in $files vocab.json merges.txt; do echo "/$repo/resolve/main/$f"; done
  done | sort)
  check '[ "$got" = "$want" ]' "it asks the hub for exactly the CLIP files ($(echo "$got" | wc -l) files)"
  [ "$got" = "$want" ] || diff <(echo "$want") <(echo "$got") | sed 's/^/     /'
  for name in $names; do
    IFS='|' read -r repo scheme <<<"${CLIPS[$name]}"
    d=$work/models/$name w=model.safetensors
    [ "$scheme" = openai ] && w=open_clip_model.safetensors
    check 'cmp -s "$hub/$repo/resolve/main/$w" "$d/model.safetensors" && [ -s "$d/vocab.json" ] && [ -s "$d/merges.txt" ] && [ ! -e "$d/labels.txt" ]' \
      "$name: the weights (as model.safetensors) and the tokenizer's files arrive, no labels"
    check 'grep -qF -- "--model $d/model.safetensors --classes imagenet" <<<"$out"' "$name: it prints the CLIP command"
    top=$("$app" --model "$d/model.safetensors" --classes "cat, dog" --text "a red umbrella" --top 3 "$photo" 2>&1)
    check '[ "$(grep -c "^[123] 0\.[0-9]* [012] " <<<"$top")" -eq 3 ]' \
      "$name: vitlens --classes, --text, --top 3 runs on the download (its vocabulary found beside it): $(echo $top)"
  done
else
  echo "SKIP the CLIP downloads: no $vocab_gz"
fi

# --- DINOv3 (issue 35): gated. A small random DINOv3ViTModel in transformers' names
# (test_dinov3.py) with a preprocessor_config.json as the hub's
g_repo=facebook/dinov3-vits16-pretrain-lvd1689m g_dir=$hub/$g_repo/resolve/main
OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 - "$src/tests/parity" "$g_dir" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_dinov3 as t3
c = dict(shape="S", D=64, L=1, H=2, F=128, C=0, gated=False, qv_bias=True, names="hf",
         file="safetensors", name="dinov3_standin")
d = Path(sys.argv[2])
t3.write_case(c, d, seed=3)
(d / "preprocessor_config.json").write_text(json.dumps({
    "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225],
    "image_processor_type": "DINOv3ViTImageProcessorFast", "resample": 2,
    "rescale_factor": 0.00392156862745098, "size": {"height": 224, "width": 224}}))
PY
gm=$work/models-gated
n0=$(wc -l < "$work/server.log")
out=$(env -u HF_TOKEN VITLENS_MODELS_DIR="$gm" "$dl" deit-tiny dinov3-vits16 2>&1); rc=$?
check '[ $rc -eq 2 ] && grep -q "HF_TOKEN is not set" <<<"$out" && grep -qF "huggingface.co/$g_repo" <<<"$out"' \
  "dinov3-vits16 without HF_TOKEN: exit 2 naming the token and the licence page: $out"
check '[ "$(wc -l < "$work/server.log")" -eq "$n0" ] && [ ! -e "$gm/deit-tiny" ]' \
  "  and nothing downloaded, not even the name before it"
out=$(HF_TOKEN=hf_wrong VITLENS_MODELS_DIR="$gm" "$dl" dinov3-vits16 2>&1); rc=$?
check '[ $rc -ne 0 ] && grep -q "licence" <<<"$out" && [ ! -e "$gm/dinov3-vits16/model.safetensors" ] && ! ls "$gm"/dinov3-vits16/*.part >/dev/null 2>&1' \
  "a token the hub refuses (401): fails naming the licence, leaves no file behind"
: > "$work/auth.log"
out=$(HF_TOKEN=hf_test_token VITLENS_MODELS_DIR="$gm" "$dl" dinov3-vits16 eva-vitl14-196 2>&1); rc=$?
check '[ $rc -eq 0 ]' "HF_TOKEN=... download-model.sh dinov3-vits16 eva-vitl14-196 exits 0"
want=$(for f in model.safetensors config.json preprocessor_config.json; do
  echo "/$g_repo/resolve/main/$f Bearer hf_test_token"; done | sort)
check '[ "$(grep -F "/$g_repo/" "$work/auth.log" | sort)" = "$want" ]' \
  "the gated repository: its three files, each asked with the token"
check '! grep -vF "/$g_repo/" "$work/auth.log" | grep -qv " -$"' \
  "the token goes to the gated repository only (EVA-L's files and the labels without it)"
d=$gm/dinov3-vits16
check 'cmp -s "$g_dir/model.safetensors" "$d/model.safetensors" && [ -s "$d/config.json" ] && [ -s "$d/preprocessor_config.json" ] && [ ! -e "$d/labels.txt" ]' \
  "dinov3-vits16: weights, config.json, preprocessor_config.json, no labels (a backbone)"
check 'grep -qF -- "--model $d/model.safetensors IMAGE" <<<"$out"' "dinov3-vits16: it prints the command"
exp=$("$app" --model "$d/model.safetensors" --export "$work/export-dinov3" "$photo" 2>&1)
check 'grep -q "^wrote " <<<"$exp"' "dinov3-vits16: vitlens --export runs on the download: $exp"

# --- SigLIP (issue 35): SiglipModel in Hugging Face's names with SentencePiece's spiece.model;
# SigLIP 2 with Gemma's tokenizer.model; small random stand-ins (tests/gui/test_cli_siglip.py's
# writer; SigLIP 2's tokenizer a Gemma-like BPE model it trains)
declare -A SIGLIPS=([siglip-b16]=google/siglip-base-patch16-224
                    [siglip2-b16]=google/siglip2-base-patch16-224)
if OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 /usr/bin/python3 - "$src/tests/gui" "$hub" \
    "${SIGLIPS[siglip-b16]}" "${SIGLIPS[siglip2-b16]}" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_cli_siglip as tc  # exits 77 without python3-sentencepiece
for repo, gemma in ((sys.argv[3], False), (sys.argv[4], True)):
    d = Path(sys.argv[2]) / repo / "resolve/main"
    d.mkdir(parents=True, exist_ok=True)
    tc.write(d, gemma=gemma)
    (d / "spiece.txt").unlink(missing_ok=True)
PY
then
  n0=$(wc -l < "$work/server.log")
  out=$("$dl" siglip-b16 siglip2-b16 2>&1); rc=$?
  check '[ $rc -eq 0 ]' "download-model.sh siglip-b16 siglip2-b16 exits 0"
  got=$(tail -n +"$((n0 + 1))" "$work/server.log" | grep -o '"GET [^ ]*' | cut -c6- | sort)
  want=$(for f in model.safetensors config.json preprocessor_config.json spiece.model; do
      echo "/${SIGLIPS[siglip-b16]}/resolve/main/$f"; done
    for f in model.safetensors config.json preprocessor_config.json tokenizer.model; do
      echo "/${SIGLIPS[siglip2-b16]}/resolve/main/$f"; done | sort)
  want=$(sort <<<"$want")
  check '[ "$got" = "$want" ]' "it asks the hub for exactly the SigLIP files ($(echo "$got" | wc -l) files)"
  [ "$got" = "$want" ] || diff <(echo "$want") <(echo "$got") | sed 's/^/     /'
  d=$work/models/siglip-b16
  check 'cmp -s "$hub/${SIGLIPS[siglip-b16]}/resolve/main/model.safetensors" "$d/model.safetensors" && [ -s "$d/spiece.model" ] && [ ! -e "$d/labels.txt" ]' \
    "siglip-b16: the weights and spiece.model arrive, no labels"
  check 'grep -qF -- "--model $d/model.safetensors --classes" <<<"$out"' "siglip-b16: it prints the command"
  top=$("$app" --model "$d/model.safetensors" --classes "cat, dog" --text "a red umbrella" --top 3 "$photo" 2>&1)
  check '[ "$(grep -c "^[123] 0\.[0-9]* [012] " <<<"$top")" -eq 3 ] && grep -q "do not sum to 1" <<<"$top"' \
    "siglip-b16: vitlens --classes, --text, --top 3 runs on the download (sigmoids, said): $(tr "\n" " " <<<"$top")"
  d=$work/models/siglip2-b16
  check '[ -s "$d/tokenizer.model" ] && grep -qF -- "--model $d/model.safetensors --classes" <<<"$out"' \
    "siglip2-b16: tokenizer.model arrives, it prints the command"
  top=$("$app" --model "$d/model.safetensors" --classes "cat, dog" --text "a red umbrella" --top 3 "$photo" 2>&1)
  check '[ "$(grep -c "^[123] 0\.[0-9]* [012] " <<<"$top")" -eq 3 ] && grep -q "do not sum to 1" <<<"$top"' \
    "siglip2-b16: vitlens --classes, --text, --top 3 runs on the download (sigmoids, said): $(tr "\n" " " <<<"$top")"
  ex=$("$app" --model "$d/model.safetensors" --export "$work/siglip2-export" "$photo" 2>&1)
  check '[ -s "$work/siglip2-export/mean_probe.npy" ]' "siglip2-b16: the image views and the probe run: $(tail -c 200 <<<"$ex")"
else
  echo "SKIP the SigLIP downloads: no python3-sentencepiece"
fi

[ $fails -eq 0 ] && echo "download: all checks passed" || echo "download: $fails checks failed"
[ $fails -eq 0 ]
