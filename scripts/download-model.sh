#!/usr/bin/env bash
# Download a pretrained ViT in timm's naming from the Hugging Face hub, with its
# config.json and, for classifiers, the ImageNet-1k labels, into MODELS/NAME/.
# MODELS is $VITLENS_MODELS_DIR if set; else, with --user or when the script is not in
# vitlens's source tree (an installed copy), $XDG_DATA_HOME/vitlens/models (default
# ~/.local/share/vitlens/models); else the source tree's models/. vitlens looks in all
# three for --model NAME. $HF_ENDPOINT replaces https://huggingface.co, e.g. for a
# mirror. The families: DeiT (with and without distillation token), ViT augreg, DINO
# (patch 16 and 8), DINOv2 (patch 14, with and without registers; and facebook/dinov2-small
# in Hugging Face's own Dinov2Model names), DINOv3 ViT-S/16 (transformers' DINOv3ViTModel
# names; gated, see below), EVA-02 Ti/14 (timm's ImageNet-1k fine-tune at 336 px: EVA's
# rotary position embedding, SwiGLU, fc_norm), EVA-L/14 (an average-pooled classifier with
# fc_norm); and CLIP (image and text
# towers, with the tokenizer's vocab.json + merges.txt): OpenAI's B/32 and B/16 in Hugging
# Face's CLIPModel names, and an OpenCLIP B/32 (LAION-2B) in OpenAI / OpenCLIP names, its
# open_clip_model.safetensors saved as model.safetensors beside its open_clip_config.json;
# SigLIP (google/siglip-base-patch16-224: both towers, SentencePiece's spiece.model) and
# SigLIP 2 (google/siglip2-base-patch16-224: both towers, Gemma's SentencePiece
# tokenizer.model) in Hugging Face's SiglipModel names.
#
# Gated models (dinov3-*: Meta's licence) need a Hugging Face token with the licence accepted
# on the model's page: $HF_TOKEN, sent as "Authorization: Bearer" to those repositories only
# (through curl's stdin or a private wget config, never on a command line); without it the
# script says so and downloads nothing.
#
# Usage: scripts/download-model.sh [--user] [NAME ...]      (no NAME: list the models)
# Then:  build/vitlens --model NAME IMAGE   (or --model MODELS/NAME/model.safetensors)
set -euo pipefail
user=0
if [ "${1:-}" = --user ]; then user=1; shift; fi
cd "$(dirname "$0")/.."
if [ -n "${VITLENS_MODELS_DIR:-}" ]; then models=$VITLENS_MODELS_DIR
elif [ $user = 1 ] || [ ! -f app/config/models.c ]; then
  data=${XDG_DATA_HOME:-}
  case $data in /*) ;; *) data=$HOME/.local/share ;; esac # the XDG spec: relative is ignored
  models=$data/vitlens/models
else models=models
fi

# name -> hub repository (timm/<architecture>.<pretrained tag>, or another's own names)
declare -A REPO=(
  [deit-tiny]=timm/deit_tiny_patch16_224.fb_in1k
  [deit-small]=timm/deit_small_patch16_224.fb_in1k
  [deit-base]=timm/deit_base_patch16_224.fb_in1k
  [deit-tiny-distilled]=timm/deit_tiny_distilled_patch16_224.fb_in1k
  [deit-small-distilled]=timm/deit_small_distilled_patch16_224.fb_in1k
  [deit-base-distilled]=timm/deit_base_distilled_patch16_224.fb_in1k
  [vit-base-augreg]=timm/vit_base_patch16_224.augreg2_in21k_ft_in1k
  [dino-vits16]=timm/vit_small_patch16_224.dino
  [dino-vits8]=timm/vit_small_patch8_224.dino
  [dino-vitb16]=timm/vit_base_patch16_224.dino
  [dinov2-vits14]=timm/vit_small_patch14_dinov2.lvd142m
  [dinov2-vits14-reg4]=timm/vit_small_patch14_reg4_dinov2.lvd142m
  [dinov2-small-hf]=facebook/dinov2-small
  [eva02-tiny]=timm/eva02_tiny_patch14_336.mim_in22k_ft_in1k
  [dinov3-vits16]=facebook/dinov3-vits16-pretrain-lvd1689m
  [eva-vitl14-196]=timm/eva_large_patch14_196.in22k_ft_in22k_in1k
  [clip-vit-b32]=openai/clip-vit-base-patch32
  [clip-vit-b16]=openai/clip-vit-base-patch16
  [openclip-vit-b32-laion2b]=laion/CLIP-ViT-B-32-laion2B-s34B-b79K
  [siglip-b16]=google/siglip-base-patch16-224
  [siglip2-b16]=google/siglip2-base-patch16-224
)
# gated on the hub: downloaded with $HF_TOKEN
GATED=" dinov3-vits16 "
# ImageNet-1k class names in index order, as id2label of a hub config.
LABELS_CONFIG=google/vit-base-patch16-224
HUB=${HF_ENDPOINT:-https://huggingface.co}

if [ $# -eq 0 ]; then
  echo "usage: $0 [--user] NAME [NAME ...]   (into $models)"; echo "models:"
  for k in "${!REPO[@]}"; do printf '  %-20s %s\n' "$k" "${REPO[$k]}"; done | sort
  exit 0
fi

fetch() { # url dest [auth]: auth 1 sends $HF_TOKEN (a gated repository)
  local hdr= rc=0
  [ "${3:-0}" = 1 ] && hdr="Authorization: Bearer $HF_TOKEN"
  if command -v curl >/dev/null; then # the header from stdin: not in ps's view
    printf '%s\n' "$hdr" | curl -fL --retry 3 -H @- -o "$2.part" "$1" || rc=$?
  else
    local conf; conf=$(mktemp); chmod 600 "$conf"
    [ -z "$hdr" ] || printf 'header = %s\n' "$hdr" > "$conf"
    wget --config="$conf" -O "$2.part" "$1" || rc=$?
    rm -f "$conf"
  fi
  if [ $rc -ne 0 ]; then
    rm -f "$2.part"
    local page=${1#"$HUB"/}
    [ "${3:-0}" = 1 ] && echo "$0: $1 failed: is HF_TOKEN a valid token, and is the licence" \
      "accepted at https://huggingface.co/${page%%/resolve/*} with that account?" >&2
    return $rc
  fi
  mv "$2.part" "$2"
}

# every name known, and a token for the gated ones, before anything is downloaded
for name in "$@"; do
  [ -n "${REPO[$name]:-}" ] || { echo "$0: unknown model '$name' (run without arguments for the list)" >&2; exit 2; }
  if [[ $GATED == *" $name "* ]] && [ -z "${HF_TOKEN:-}" ]; then
    echo "$0: $name (${REPO[$name]}) is gated on Hugging Face and HF_TOKEN is not set:" \
      "nothing downloaded. Accept the licence at https://huggingface.co/${REPO[$name]}," \
      "make a read token at https://huggingface.co/settings/tokens, then:" \
      "HF_TOKEN=hf_... $0 $name" >&2
    exit 2
  fi
done

for name in "$@"; do
  repo=${REPO[$name]} auth=0
  [[ $GATED == *" $name "* ]] && auth=1
  dir=$models/$name; mkdir -p "$dir"
  echo "== $name ($repo)"
  case $name in
    clip-*) # Hugging Face CLIPModel: weights, config, preprocessing, the tokenizer's files
      for f in model.safetensors config.json preprocessor_config.json vocab.json merges.txt; do
        [ -s "$dir/$f" ] || fetch "$HUB/$repo/resolve/main/$f" "$dir/$f"
      done ;;
    siglip-*|siglip2-*) # Hugging Face SiglipModel: weights, config, preprocessing and the
      # SentencePiece tokenizer: SigLIP's spiece.model, SigLIP 2's Gemma tokenizer.model
      files="model.safetensors config.json preprocessor_config.json"
      case $name in siglip-*) files="$files spiece.model" ;; siglip2-*) files="$files tokenizer.model" ;; esac
      for f in $files; do
        [ -s "$dir/$f" ] || fetch "$HUB/$repo/resolve/main/$f" "$dir/$f"
      done ;;
    openclip-*) # OpenCLIP's own file (OpenAI names), its config, the tokenizer's files; not
      # the repository's config.json, which describes its Hugging Face copy
      [ -s "$dir/model.safetensors" ] ||
        fetch "$HUB/$repo/resolve/main/open_clip_model.safetensors" "$dir/model.safetensors"
      for f in open_clip_config.json vocab.json merges.txt; do
        [ -s "$dir/$f" ] || fetch "$HUB/$repo/resolve/main/$f" "$dir/$f"
      done ;;
    dinov3-*) # transformers' DINOv3ViTModel: weights, config (rope_theta, registers), the
      # processor's resize and normalisation
      for f in model.safetensors config.json preprocessor_config.json; do
        [ -s "$dir/$f" ] || fetch "$HUB/$repo/resolve/main/$f" "$dir/$f" $auth
      done ;;
    *)
      [ -s "$dir/model.safetensors" ] || fetch "$HUB/$repo/resolve/main/model.safetensors" "$dir/model.safetensors"
      [ -s "$dir/config.json" ] || fetch "$HUB/$repo/resolve/main/config.json" "$dir/config.json" ;;
  esac
  case $name in
    dino-*|dinov2-*|dinov3-*|clip-*|openclip-*|siglip-*|siglip2-*) ;; # backbones, CLIP, SigLIP: no ImageNet labels (CLIP's
      # zero-shot classes come from --classes, --prompts, --classes imagenet)
    *)
      if [ ! -s "$dir/labels.txt" ]; then
        fetch "$HUB/$LABELS_CONFIG/resolve/main/config.json" "$dir/.labels-config.json"
        /usr/bin/python3 - "$dir/.labels-config.json" "$dir/labels.txt" <<'PY'
import json, sys
id2label = json.load(open(sys.argv[1]))["id2label"]
with open(sys.argv[2], "w") as f:
    for i in range(len(id2label)):
        f.write(id2label[str(i)] + "\n")
PY
        rm -f "$dir/.labels-config.json"
      fi ;;
  esac
  # DINOv2 is trained at 518 px (37x37 patches, 1370 tokens); at 224 px it has 16x16
  size=; case $name in dinov2-*) size=" --size 224" ;; esac
  case $name in
    siglip-*|siglip2-*)
      echo "   build/vitlens --model $dir/model.safetensors --classes \"cat, dog\" IMAGE   (sigmoid scores; / and a phrase)"
      echo "   build/vitlens --model $name --text \"a red umbrella\" --export DIR IMAGE"
      continue ;;
    clip-*|openclip-*)
      echo "   build/vitlens --model $dir/model.safetensors --classes imagenet IMAGE   (then / and a phrase)"
      echo "   build/vitlens --model $name --text \"a red umbrella\" --export DIR IMAGE"
      continue ;;
  esac
  echo "   build/vitlens --model $dir/model.safetensors$([ -s "$dir/labels.txt" ] && echo " --labels $dir/labels.txt")$size IMAGE"
  echo "   or: build/vitlens --model $name$size IMAGE"
done
