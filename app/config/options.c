/* options.c - the command line: parsing, --help, and the key list shown by
 * --help and by the help overlay. */
#define _POSIX_C_SOURCE 200809L /* isatty */
#include "config/options.h"
#include "config/keys.h"
#include "render/colormap.h"
#include "config/files.h"
#include "view/mapkind.h"
#include "config/models.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * Usage and parsing */

/* The synopsis and the description, with the map kinds' lists from the table. */
static void usage_head(FILE *f) {
    fputs("usage: vitlens [--model PATH] [--labels FILE] [--layout FILE] [--heads N]\n"
          "               [--size S|HxW] [--whole] [--opacity A] [--discard R]\n"
          "               [--colormap NAME] [--bilinear]\n"
          "               [--class ID|NAME] [--save-dir DIR] [IMAGE|FOLDER ...]\n"
          "       vitlens [--model PATH] [--labels FILE] [--size S|HxW] [--whole] --top K IMAGE\n"
          "       vitlens --model CLIP [--classes NAMES|imagenet | --prompts FILE]\n"
          "               [--template T|--templates FILE] [--text PHRASE] [--vocab PATH]\n"
          "               [--top K | --export DIR | --eval] IMAGE    (or the window: /)\n"
          "       vitlens [--model PATH] [--size S|HxW] [--whole] [--opacity A] [--discard R]\n"
          "               [--colormap NAME] [--bilinear] [--class ID|NAME] --export DIR IMAGE...\n"
          "       vitlens [--model PATH] [--class ID|NAME] [--eval-out DIR] [--masks DIR]\n"
          "               [--shard K/N] [--eval-steps N] [--no-sanity] --eval IMAGE|FOLDER...\n"
          "       vitlens [--eval-out DIR] --eval-merge DIR...\n"
          "       vitlens [--model PATH] [--size S|HxW] [--layer L] [--head H] [--patch ROW,COL]\n"
          "               [--lesson FILE] --lesson-export DIR IMAGE\n"
          "\n",
          f);
    fputs("Runs a Vision Transformer (.safetensors) on a photo and shows the attention\n"
          "of the CLS token over the patch grid: every layer and head, the head fusions\n"
          "(mean, max, min) and attention rollout, as a heatmap over the crop the model saw;\n"
          "with register or distillation tokens, bars beside it show their share of the row.\n",
          f);
    /* the kinds' lists from the table (mapkind.h) */
    char names[1024];
    keys_kind_names(names, sizeof names - 1, MAP_GROUP_CLASS, 0);
    strcat(names, ".");
    fputs("For a classifier, class-specific maps show why it sees a class (1-5, --class):", f);
    keys_print_wrapped(f, names, 0, 80);
    keys_kind_names(names, sizeof names - 1, MAP_GROUP_TOKENS, 1);
    strcat(names, ".");
    fputs("What the tokens hold:", f);
    keys_print_wrapped(f, names, 0, 21);
    fputs("Without --model it uses the built-in model, a small ViT trained by this project to\n"
          "tell which of six shapes a cluttered scene holds; without an IMAGE it opens on the\n"
          "first of that model's demo scenes (N steps through them). Several images, or a\n"
          "folder, make a slideshow: N / P step through them and keep the view.\n"
          "\n"
          "options:\n"
          "  --model PATH|NAME  weights (.safetensors, timm or Hugging Face names: ViT, DeiT\n"
          "                  with or without distillation, DINO, DINOv2 with or without\n"
          "                  registers; or a PyTorch checkpoint .pth / .bin: also\n"
          "                  torchvision's ViTs and the notebooks' layouts, see --layout);\n"
          "                  config.json beside it is read. A NAME is a model\n"
          "                  downloaded by scripts/download-model.sh: MODELS/NAME/, with\n"
          "                  its labels.txt (MODELS: see the environment below)\n"
          "                  (default, or --model builtin: the built-in model,\n"
          "                  ASSETS/default/model.safetensors, on its demo scenes)\n"
          "  --labels FILE   class names, one per line (ImageNet synset lines are fine);\n"
          "                  default: the names in config.json, if any\n"
          "  --layout FILE   a layout (JSON) naming the checkpoint's tensors, for a ViT of\n"
          "                  your own (docs/your-own-vit.md); default: timm's, transformers'\n"
          "                  or the first of ASSETS/layouts/ that matches\n"
          "  --heads N       number of attention heads (default: config.json, else width/64)\n"
          "  --size S|HxW    run the model at this input size in px, each side a multiple of\n"
          "                  the patch size (e.g. 320 or 224x336); the position embedding is\n"
          "                  resampled bicubically as timm (or transformers) does\n"
          "                  (default: config.json's size, else the training size)\n"
          "  --whole         keep the whole photo: resize it to the input size without\n"
          "                  cropping (timm's crop_mode squash, crop_pct 1)\n"
          "  --opacity A     heatmap opacity in [0, 1] (default 0.6)\n"
          "  --discard R     rollout's discard ratio in [0, 1): that fraction of the smallest\n"
          "                  fused attention weights to patches is zeroed per layer (default 0)\n"
          "  --colormap NAME viridis (default), inferno, magma, turbo or greys\n"
          "  --bilinear      upsample maps bilinearly between patch centres (default: nearest,\n"
          "                  every patch one flat cell)\n"
          "  --ignore-orientation  run on a photo's pixels as stored, not turned upright by\n"
          "                  its EXIF orientation (as PIL and timm do; default: upright)\n"
          "  --class ID|NAME the class the class-specific maps explain (the kinds above):\n"
          "                  a class index from 0, or a name as the labels give it, whole or\n"
          "                  one of its comma-separated names (\"tiger cat\"); default: the\n"
          "                  top-1 class. The window opens on a class-specific map\n"
          "  --save-dir DIR  where S saves the view (default: the current directory)\n",
          f);
    fputs(/* CLIP (view/clip.h): zero-shot labels and a phrase to explain */
          "  --classes NAMES CLIP: zero-shot classes, comma-separated (\"cat, dog, espresso\n"
          "                  cup\"), each put in the template and embedded by the text\n"
          "                  tower; the top-5 panel and\n"
          "                  --top give softmax(logit_scale * cos(image, text)) over them\n"
          "                  (SigLIP: sigmoid(logit_scale * cos + logit_bias) of each class\n"
          "                  alone, 64 tokens; they do not sum to 1).\n"
          "                  --classes imagenet: the 1000 ImageNet classes with the 7\n"
          "                  templates the CLIP authors selected; imagenet80: the paper's 80\n"
          "                  (80000 texts: minutes; the lists are ASSETS/clip/, MIT licence)\n"
          "  --prompts FILE  CLIP: the classes from a file, one per line (# comments)\n"
          "  --template T    the classes' template, {} the name (default \"a photo of a {}.\")\n"
          "  --templates FILE  several templates, one per line: each class's embedding is\n"
          "                  the mean of their normalised embeddings (the CLIP paper's\n"
          "                  prompt ensembling)\n"
          "  --text PHRASE   CLIP: the class-specific maps explain this phrase (its logit is\n"
          "                  the score; it joins the classes, last) for --export, --eval,\n"
          "                  --top and the window; text past 77 tokens is cut, with a notice\n"
          "  --vocab PATH    CLIP's vocabulary: vocab.json + merges.txt (a file or their\n"
          "                  folder) or bpe_simple_vocab_16e6.txt.gz (default: beside the\n"
          "                  model, or in its tokenizer/ folder)\n",
          f);
    fputs(/* the interventions (app/view/interv.c), in a string of their own: C99 only
             promises 4095 characters a literal */
          "  --ablate L:H[,L:H...]  what if? Run the model with these heads ablated (layer,\n"
          "                  head from 1): the head's output zeroed before the projection\n"
          "                  (Michel et al. 2019; transformers' head_mask). The interventions\n"
          "                  apply to --top, --export, --eval and the window\n"
          "  --drop-patches R,C[;R,C...]  take these patches (row, column from 1) out of the\n"
          "                  token sequence; the others keep their position embeddings. Maps\n"
          "                  show a dropped patch hatched (NaN in the .npy files)\n"
          "  --fill-patches R,C[;R,C...]  set these patches to the mean colour (0 after\n"
          "                  normalisation, as --eval's deletion); they stay in the sequence\n"
          "  --pos-embed MODE  shuffle: the patches' position embeddings shuffled among them\n"
          "                  (seeded, --pos-seed); zero: no position embedding at all\n"
          "  --pos-seed N    the seed of --pos-embed shuffle (default 0)\n"
          "  --temperature L:TAU  attention of layer L as softmax(scores / TAU), TAU > 0\n"
          "  --top K         print the K most probable classes and exit, one per line:\n"
          "                    RANK PROB CLASS_ID LABEL     e.g. \"1 0.6123 281 tabby, tabby "
          "cat\"\n"
          "                  RANK from 1, PROB the softmax probability (SigLIP: the class's\n"
          "                  own sigmoid), CLASS_ID from 0,\n"
          "                  LABEL the rest of the line (absent without class names)\n",
          f);
}

/* --export: the files, with every kind's tag from the table. */
static void usage_export(FILE *f) {
    fputs("  --export DIR    write every map as a PNG into DIR and exit, and beside each its\n"
          "                  raw values, before normalisation, as .npy (float32, [gh, gw];\n"
          "                  [Sh, Sw] for a pixel map; colours [gh, gw, 4], A the foreground):\n"
          "                  L01_H01.png ... (layer, head from 1), L01_mean/max/min.png (head\n"
          "                  fusions) for attention; for every other kind its tag, per layer\n"
          "                  (L01_rollout.png, mean fusion, --discard) or once, and for the\n"
          "                  class-specific kinds the class of --class (default: the top-1,\n"
          "                  class281_chefer.png, class281_L01_logit-lens.png). The tags:\n",
          f);
    char tags[1024];
    size_t len = 0;
    for (int k = 1; k < MAP_KIND_COUNT && len < sizeof tags; k++) /* the first row untagged */
        len += (size_t)snprintf(tags + len, sizeof tags - len, "%s%s%s", k > 1 ? ", " : "",
                                MAP_KINDS[k].tag, k + 1 < MAP_KIND_COUNT ? "" : ".");
    fputs("                  ", f);
    keys_print_wrapped(f, tags, 18, 18);
    fputs("                  For slides: L01_heads.png (every head of a layer in a grid) and a\n"
          "                  contact sheet (layers x heads) per kind with per-head maps,\n"
          "                  contact_sheet.png, contact_sheet_TAG.png, and with a head\n"
          "                  contact_sheet_class281.png (a column per class-specific kind);\n"
          "                  logit_lens.csv and high_norm_tokens.csv. Several IMAGEs: each\n"
          "                  into DIR/NAME/, with the feature PCA over all of them as\n"
          "                  L01_pca-joint. With a head, which heads matter for the class:\n"
          "                  head_importance.csv/.png (the drop in its probability with each\n"
          "                  head ablated alone, layers x heads) and head_pruning.csv/.png (the\n"
          "                  least important heads pruned first, Michel et al. 2019)\n",
          f);
}

/* The keys (keys_list, as the help overlay shows them), the kinds in E's order, the
 * environment. */
static void usage_keys(FILE *f) {
    KeyList keys;
    keys_list(&keys);
    for (int i = 0; i < keys.n; i++) fprintf(f, "  %-14s  %s\n", keys.rows[i][0], keys.rows[i][1]);
    fputs("\nmap kinds, in the order E steps through them:\n ", f);
    for (int m = 0, col = 1; m < MAP_KIND_COUNT; m++) { /* wrapped at 80 columns */
        int w = (int)strlen(MAP_KINDS[m].name) + (m + 1 < MAP_KIND_COUNT);
        if (col + 1 + w > 80) fputs("\n ", f), col = 1;
        col += fprintf(f, " %s%s", MAP_KINDS[m].name, m + 1 < MAP_KIND_COUNT ? "," : "");
    }
    fprintf(f,
            "\n\n"
            "environment:\n"
            "  VITLENS_ASSETS      the folder ASSETS holding default/: the built-in model\n"
            "                      and its demo/ scenes (default: %s)\n"
            "  VITLENS_MODELS_DIR  a folder of downloaded models looked in first; then\n"
            "                      $XDG_DATA_HOME/vitlens/models (default\n"
            "                      ~/.local/share/vitlens/models)%s%s\n"
            "  VITLENS_SHADER_DIR  directory of the *.glsl shaders\n"
            "  VITLENS_FONT        font file to use instead of fontconfig's DejaVu Sans\n"
            "  VITLENS_TRACE=1     print each drawn frame's state and status line on stdout\n"
            "  VITLENS_PRESENT=swap  an offscreen canvas copied whole and a swap (default on\n"
            "                      X11 with GLX_MESA_copy_sub_buffer: only what changed is\n"
            "                      copied to the window)\n"
            "  VITLENS_FULL_REDRAW=1   draw every frame whole, not only what changed\n"
            "  VITLENS_CHECK_REDRAW=1  also draw each partial frame whole, offscreen, and say\n"
            "                      how many pixels differ (VITLENS_TRACE's mismatch=)\n"
            "  VITLENS_ATT         how a forward pass keeps the attention for the maps: auto\n"
            "                      (default: kept when it takes at most 512 MiB), keep, or\n"
            "                      recompute (queries and keys kept, the attention recomputed\n"
            "                      by each map: the large-input path, maps on the worker)\n"
            "\n"
            "The window remembers the colormap, opacity, upsampling, panels and the last model\n"
            "with its photos in $XDG_CONFIG_HOME/vitlens/settings (default\n"
            "~/.config/vitlens/settings), written on quit; the options override them; --top\n"
            "and --export only read them. Without an IMAGE the last model opens on its photos,\n"
            "at the one it showed last; with none, the built-in model on its demo scenes.\n"
            "The window prints \"ready PATH\" on stdout once a photo's maps are on screen.\n"
            "Errors name the file; the headless modes exit 1 on bad input, 2 on bad usage.\n",
            VITLENS_ASSETS_DIR_DEFAULT, VITLENS_MODELS_DIR_SOURCE[0] ? ", then " : "",
            VITLENS_MODELS_DIR_SOURCE);
}

void options_usage(FILE *f) {
    usage_head(f);
    usage_export(f);
    fputs("  --lesson-export DIR  the lesson (how the ViT computes, step by step, on IMAGE) as\n"
          "                  slides, then exit: every step's picture NN_STEP.png (1280x720),\n"
          "                  its numbers NN_STEP[_PART].npy (float32), steps.json (names,\n"
          "                  captions, shapes) and lesson.md (the captions and pictures)\n"
          "  --lesson FILE   a lesson script (docs/lessons.md): the window opens in the lesson\n"
          "                  view on its steps; with --lesson-export, its steps are written\n"
          "                  (default: assets/default/lesson.txt, Page Down in the window)\n"
          "  --layer L       the lesson's block, from 1 (default 1)\n"
          "  --head H        the lesson's head, from 1 (default 1)\n"
          "  --patch ROW,COL the lesson's patch and query token, from 1 (default: the centre)\n",
          f);
    fputs("  --eval          which map can I trust? For every map kind with a value per patch\n"
          "                  (the last layer, mean of the heads, the CLS token as the query)\n"
          "                  and two baselines (random, centred Gaussian), on the class the\n"
          "                  model predicts (or --class), then exit: perturbation tests\n"
          "                  (Chefer et al. 2021: patches set to the mean in steps of 10%,\n"
          "                  most / least relevant first), deletion and insertion (Petsiuk\n"
          "                  et al. 2018), localisation with --masks (pointing game, energy,\n"
          "                  top-k IoU) and the sanity check (Adebayo et al. 2018: head and\n"
          "                  blocks re-initialised from the top, Spearman rank correlation);\n"
          "                  a markdown table on stdout, an unreadable image is skipped\n"
          "  --eval-out DIR  also write the rows as CSV (images, perturbation, localisation,\n"
          "                  sanity), the table as summary.md and the plots as PNG\n"
          "  --masks DIR     ground-truth masks: DIR/NAME_mask.png (else DIR/NAME.png) for\n"
          "                  the photo NAME.*, the photo's size, inside where red >= 128\n"
          "  --shard K/N     evaluate images K, K+N, K+2N, ... (from 1) of the sorted list\n"
          "  --eval-steps N  deletion and insertion steps (default 20)\n"
          "  --no-sanity     leave out the sanity check (the slowest part)\n"
          "  --eval-merge    combine the --eval-out folders of shards (the arguments) into\n"
          "                  the table one run would print; with --eval-out, one folder\n"
          "  --stdin-drops   read file paths from stdin, one per line, as if dropped on the\n"
          "                  window (for scripts and tests)\n"
          "  --list-kinds    print the map kinds, one per line, and exit: TAG, KEY (- for E\n"
          "                  only), GROUP (attention, class, tokens), NAME, TITLE and NEEDS\n"
          "                  (- for any model, classifier, map-head), separated by tabs\n"
          "  --version       print the version and exit\n"
          "  -h, --help      this help\n"
          "  --              what follows is an IMAGE or FOLDER, even if it starts with -\n"
          "\n"
          "keys:\n",
          f);
    usage_keys(f);
}

/* An option that takes a value: --model PATH, --top K, ... (a: the option, val: its value).
 * 0, or 2 with the message on stderr. */
static int parse_value(Options *o, const char *a, const char *val) {
    /* every number is parsed whole (strtol/strtof with end and errno checked): "12x" or
     * "1e99" is an error naming the option, never a silent prefix or overflow */
    char *end = NULL;
    errno = 0;
    if (!strcmp(a, "--model")) {
        o->model_path = val;
    } else if (!strcmp(a, "--labels")) {
        o->labels_path = val;
    } else if (!strcmp(a, "--layout")) { /* a layout file naming the checkpoint's tensors */
        o->load.layout_path = val;
    } else if (!strcmp(a, "--export")) {
        o->export_dir = val;
    } else if (!strcmp(a, "--lesson")) {
        o->lesson_path = val;
    } else if (!strcmp(a, "--lesson-export")) {
        o->lesson_export_dir = val;
    } else if (!strcmp(a, "--layer") || !strcmp(a, "--head")) {
        long n = strtol(val, &end, 10);
        if (errno || !*val || *end || n < 1 || n > 65536) {
            fprintf(stderr, "vitlens: %s %s: expected a positive integer (from 1)\n", a, val);
            return 2;
        }
        *(!strcmp(a, "--layer") ? &o->lesson_layer : &o->lesson_head) = (int)n;
    } else if (!strcmp(a, "--patch")) {
        long r = strtol(val, &end, 10), c = 0;
        if (!errno && end != val && *end == ',') {
            const char *cs = end + 1;
            c = strtol(cs, &end, 10);
            if (end == cs) c = 0;
        }
        if (errno || *end || r < 1 || c < 1 || r > 65536 || c > 65536) {
            fprintf(stderr, "vitlens: --patch %s: expected ROW,COL from 1 (e.g. 7,8)\n", val);
            return 2;
        }
        o->lesson_row = (int)r, o->lesson_col = (int)c;
    } else if (!strcmp(a, "--eval-out")) {
        o->eval_out = val;
    } else if (!strcmp(a, "--masks")) {
        o->masks_dir = val;
    } else if (!strcmp(a, "--shard")) { /* K/N: this run takes images K, K+N, ... */
        long k = strtol(val, &end, 10), n = 0;
        if (!errno && end != val && *end == '/') {
            const char *ns = end + 1;
            n = strtol(ns, &end, 10);
            if (end == ns) n = 0;
        }
        if (errno || *end || n < 1 || n > 1000000 || k < 1 || k > n) {
            fprintf(stderr, "vitlens: --shard %s: expected K/N with 1 <= K <= N\n", val);
            return 2;
        }
        o->shard_k = (int)k, o->shard_n = (int)n;
    } else if (!strcmp(a, "--eval-steps")) {
        long n = strtol(val, &end, 10);
        if (errno || !*val || *end || n < 2 || n > 1000) {
            fprintf(stderr, "vitlens: --eval-steps %s: expected an integer from 2 to 1000\n", val);
            return 2;
        }
        o->eval_steps = (int)n;
    } else if (!strcmp(a, "--class")) { /* resolved against the labels once the model loads */
        if (!*val) {
            fprintf(stderr, "vitlens: --class needs a class index or name\n");
            return 2;
        }
        o->class_arg = val;
    } else if (!strcmp(a, "--save-dir")) {
        o->save_dir = val;
    } else if (!strcmp(a, "--classes")) {
        o->clip.classes = val;
    } else if (!strcmp(a, "--prompts")) {
        o->clip.prompts = val;
    } else if (!strcmp(a, "--template")) {
        o->clip.template_ = val;
    } else if (!strcmp(a, "--templates")) {
        o->clip.templates = val;
    } else if (!strcmp(a, "--text")) {
        o->clip.text = val;
    } else if (!strcmp(a, "--vocab")) {
        o->clip.vocab = val;
    } else if (!strcmp(a, "--colormap")) {
        int found = -1;
        for (int k = 0; k < COLORMAP_COUNT; k++)
            if (!strcmp(val, colormap_names[k])) found = k;
        if (found < 0) {
            fprintf(stderr,
                    "vitlens: --colormap %s: expected viridis, inferno, magma, turbo or "
                    "greys\n",
                    val);
            return 2;
        }
        o->colormap = found, o->given_colormap = 1; /* given: the settings do not override it */
    } else if (!strcmp(a, "--heads") || !strcmp(a, "--top")) {
        long n = strtol(val, &end, 10);
        if (errno || !*val || *end || n < 1 || n > 100000) {
            fprintf(stderr, "vitlens: %s %s: expected a positive integer\n", a, val);
            return 2;
        }
        /* the same check for both: pick the field the option sets */
        *(!strcmp(a, "--heads") ? &o->load.n_heads : &o->top_k) = (int)n;
    } else if (!strcmp(a, "--size")) {
        /* S or HxW, px */
        long h = strtol(val, &end, 10), w = h;
        if (!errno && end != val && (*end == 'x' || *end == 'X')) {
            const char *ws = end + 1;
            w = strtol(ws, &end, 10);
            if (end == ws) w = 0;
        }
        if (errno || end == val || *end || h < 1 || w < 1 || h > VIT_MAX_INPUT ||
            w > VIT_MAX_INPUT) {
            fprintf(stderr,
                    "vitlens: --size %s: expected S or HxW in px (e.g. 320 or 224x336), "
                    "at most %d\n",
                    val, VIT_MAX_INPUT);
            return 2;
        }
        o->load.image_h = (int)h, o->load.image_w = (int)w;
    } else if (!strcmp(a, "--opacity")) {
        float f = strtof(val, &end);
        if (errno || !*val || *end || !(f >= 0.0f && f <= 1.0f)) {
            fprintf(stderr, "vitlens: --opacity %s: expected a number in [0, 1]\n", val);
            return 2;
        }
        o->opacity = f, o->given_opacity = 1;
    } else if (!strcmp(a, "--discard")) {
        float f = strtof(val, &end);
        if (errno || !*val || *end || !(f >= 0.0f && f < 1.0f)) {
            fprintf(stderr, "vitlens: --discard %s: expected a number in [0, 1)\n", val);
            return 2;
        }
        o->discard = f;
    } else {
        char msg[600];
        int r = interv_parse(&o->interv, a, val, msg, sizeof msg);
        if (r < 0) fprintf(stderr, "vitlens: %s\n", msg);
        if (r > 0) fprintf(stderr, "vitlens: unknown option %s (see --help)\n", a);
        if (r) return 2;
    }
    return 0;
}

/* After the arguments: the defaults, VITLENS_ATT, and the options that go together.
 * 0, or 2 with the message on stderr. */
static int parse_check(Options *o) {
    if (!o->eval_steps) o->eval_steps = 20;
    /* VITLENS_ATT: force the large-input path (or keep the attention), for tests and for
     * measuring; the default keeps it when it fits VIT_ATT_KEEP_MAX_BYTES */
    const char *att = getenv("VITLENS_ATT");
    if (att && *att && strcmp(att, "auto")) {
        if (!strcmp(att, "keep")) {
            o->att = VIT_ATT_KEEP;
        } else if (!strcmp(att, "recompute")) {
            o->att = VIT_ATT_RECOMPUTE;
        } else {
            fprintf(stderr, "vitlens: VITLENS_ATT=%s: expected auto, keep or recompute\n", att);
            return 2;
        }
    }
    /* the headless modes exclude one another, and each option that only one mode reads is
     * refused without it rather than ignored */
    int modes = !!o->top_k + !!o->export_dir + o->eval + o->eval_merge + !!o->lesson_export_dir;
    if (modes > 1) {
        fprintf(stderr, "vitlens: --top, --export, --lesson-export, --eval and --eval-merge go one "
                        "at a time\n");
        return 2;
    }
    if (o->lesson_export_dir && o->n_image_args != 1) {
        fprintf(stderr, "vitlens: --lesson-export takes one IMAGE (got %d)\n", o->n_image_args);
        return 2;
    }
    if (o->lesson_path && (o->top_k || o->export_dir || o->eval || o->eval_merge)) {
        fprintf(stderr, "vitlens: --lesson goes with the window or --lesson-export\n");
        return 2;
    }
    if (!o->lesson_export_dir && (o->lesson_layer || o->lesson_head || o->lesson_row)) {
        fprintf(stderr, "vitlens: --layer, --head and --patch go with --lesson-export\n");
        return 2;
    }
    if ((o->eval || o->eval_merge) && !o->image_path) {
        fprintf(stderr, "vitlens: %s needs %s\n", o->eval ? "--eval" : "--eval-merge",
                o->eval ? "an IMAGE or FOLDER" : "the shards' --eval-out folders");
        return 2;
    }
    if (o->eval_merge && interv_any(&o->interv)) {
        fprintf(stderr, "vitlens: --eval-merge runs no model: the interventions go with --top, "
                        "--export, --eval or the window\n");
        return 2;
    }
    if (!o->eval && !o->eval_merge && (o->eval_out || o->masks_dir || o->shard_n || o->no_sanity)) {
        fprintf(stderr, "vitlens: --eval-out, --masks, --shard and --no-sanity go with --eval\n");
        return 2;
    }
    char msg[600];
    if (clip_spec_check(&o->clip, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 2;
    }
    if (clip_spec_any(&o->clip) && (o->lesson_export_dir || o->eval_merge)) {
        fprintf(stderr, "vitlens: --classes, --prompts, --template(s), --text and --vocab go with "
                        "the window, --top, --export or --eval\n");
        return 2;
    }
    if (o->clip.text && o->class_arg) {
        fprintf(stderr, "vitlens: --class and --text both say what the maps explain: give one\n");
        return 2;
    }
    if ((o->top_k || o->export_dir) && !o->image_path) {
        fprintf(stderr, "vitlens: --%s needs an IMAGE\n", o->top_k ? "top" : "export");
        return 2;
    }
    if (o->top_k && o->n_image_args > 1) {
        fprintf(stderr, "vitlens: --%s takes one image (got %s and %s)\n",
                o->top_k ? "top" : "export", o->image_args[0], o->image_args[1]);
        return 2;
    }
    return 0;
}

/* CLIP's zero-shot classes through the text tower (--classes imagenet: 7000 texts, a minute
 * or more the first time): how far, on stderr; on a terminal one line rewritten. */
static void clip_progress(int done, int total, int n_classes, int n_templates) {
    static int last_pct = -1;
    int tty = isatty(2), pct = (int)(100.0 * done / total);
    if (done == 0) {
        fprintf(stderr,
                "vitlens: embedding %d classes x %d templates (%d texts) with the text "
                "tower; kept in the cache for the next run\n",
                n_classes, n_templates, total);
        last_pct = -1;
    }
    if (tty ? pct != last_pct : (pct / 25 != last_pct / 25 || done == total))
        fprintf(stderr,
                tty ? "\rvitlens: %d / %d texts (%d%%)%s" : "vitlens: %d / %d texts (%d%%)%s", done,
                total, pct, tty ? (done == total ? "\n" : "") : "\n");
    last_pct = pct;
}

int options_parse(Options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->clip.progress = clip_progress;
    o->opacity = 0.6f;   /* --help's default; the settings may replace it later */
    int only_images = 0; /* after "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (only_images || a[0] != '-') { /* an IMAGE or FOLDER */
            if (o->n_image_args >= OPTIONS_MAX_IMAGES) {
                fprintf(stderr, "vitlens: more than %d images\n", OPTIONS_MAX_IMAGES);
                return 2;
            }
            if (!o->image_path) o->image_path = a;
            o->image_args[o->n_image_args++] = a;
        } else if (!strcmp(a, "--")) {
            only_images = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            options_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--version")) {
            printf("vitlens %s\n", VITLENS_VERSION);
            return 1;
        } else if (!strcmp(a, "--list-kinds")) {
            keys_list_kinds(stdout);
            return 1;
        } else if (!strcmp(a, "--stdin-drops")) {
            o->stdin_drops = 1;
        } else if (!strcmp(a, "--bilinear")) {
            o->bilinear = 1;
        } else if (!strcmp(a, "--ignore-orientation")) {
            o->ignore_orientation = 1;
        } else if (!strcmp(a, "--eval")) {
            o->eval = 1;
        } else if (!strcmp(a, "--eval-merge")) {
            o->eval_merge = 1;
        } else if (!strcmp(a, "--no-sanity")) {
            o->no_sanity = 1;
        } else if (!strcmp(a, "--whole")) {
            o->load.whole_image = 1;
        } else if (a[0] == '-' && a[1] == '-') { /* the rest take a value: the next argument */
            if (!val) {
                fprintf(stderr, "vitlens: %s needs a value (see --help)\n", a);
                return 2;
            }
            if (parse_value(o, a, val)) return 2;
            i++;
        } else { /* "-v", "-", "-model": no such option (a file named so: after "--") */
            fprintf(stderr,
                    "vitlens: unknown option %s (see --help; a file whose name starts with -: "
                    "after --)\n",
                    a);
            return 2;
        }
    }
    return parse_check(o);
}

/* No IMAGE given: the photos the last model showed, those still there, become the IMAGE
 * arguments (and the photo it showed last the one opened first). 1 when some are. */
static int options_remembered_photos(Options *o) {
    Settings *s = &o->settings;
    struct stat st;
    for (int i = 0; i < s->n_images && o->n_image_args < OPTIONS_MAX_IMAGES; i++)
        if (stat(s->images[i], &st) == 0) o->image_args[o->n_image_args++] = s->images[i];
    if (s->photo[0] && stat(s->photo, &st) == 0) o->start_photo = s->photo;
    if (!o->n_image_args && o->start_photo) o->image_args[o->n_image_args++] = o->start_photo;
    if (o->n_image_args) o->image_path = o->image_args[0];
    return o->n_image_args > 0;
}

void options_apply_settings(Options *o, int window) {
    Settings *s = &o->settings;
    settings_init(s);
    o->settings_msg[0] = '\0';
    if (settings_path(o->settings_path, sizeof o->settings_path)) {
        o->settings_path[0] = '\0';
        return;
    }
    settings_load(s, o->settings_path, o->settings_msg, sizeof o->settings_msg);
    /* the display settings apply to every mode (so --export looks as the window did),
     * unless the command line gave them; the model and photos only to the window */
    if (!o->given_colormap && s->colormap >= 0) o->colormap = s->colormap;
    if (!o->given_opacity && s->opacity >= 0.0f) o->opacity = s->opacity;
    if (!o->bilinear && s->bilinear > 0) o->bilinear = 1;
    if (!window || o->model_path || !s->model[0]) return;
    struct stat st;
    if (stat(s->model, &st) != 0) { /* moved or deleted since: say so; the built-in model instead */
        if (!o->settings_msg[0])
            snprintf(o->settings_msg, sizeof o->settings_msg,
                     "the last model, %.400s, is gone: the built-in model instead", s->model);
        return;
    }
    /* no IMAGE and none remembered: the built-in model on its demo scenes, as without
     * settings (a downloaded model has no demo scenes to open on) */
    if (!o->n_image_args && !options_remembered_photos(o)) return;
    snprintf(o->model_buf, sizeof o->model_buf, "%s", s->model);
    o->model_path = o->model_buf;
    if (!o->labels_path && s->labels[0] && stat(s->labels, &st) == 0) {
        snprintf(o->labels_buf, sizeof o->labels_buf, "%s", s->labels);
        o->labels_path = o->labels_buf;
    }
}

/* --classes imagenet / imagenet80: the names and templates shipped in ASSETS/clip/. 0, or
 * -1 (message printed). */
static int options_imagenet(Options *o) {
    const char *c = o->clip.classes;
    if (!c || (strcmp(c, CLIP_IMAGENET) && strcmp(c, CLIP_IMAGENET_80))) return 0;
    char msg[1200];
    if (files_asset(o->clip_classes_buf, sizeof o->clip_classes_buf, CLIP_IMAGENET_CLASSES, msg,
                    sizeof msg)) {
        fprintf(stderr, "vitlens: --classes %s: %s\n", c, msg);
        return -1;
    }
    o->clip.prompts = o->clip_classes_buf, o->clip.classes = NULL;
    if (o->clip.template_ || o->clip.templates) return 0; /* the user's templates instead */
    const char *t =
        strcmp(c, CLIP_IMAGENET) ? CLIP_IMAGENET_TEMPLATES_80 : CLIP_IMAGENET_TEMPLATES_7;
    if (files_asset(o->clip_templates_buf, sizeof o->clip_templates_buf, t, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: --classes %s: %s\n", c, msg);
        return -1;
    }
    o->clip.templates = o->clip_templates_buf;
    return 0;
}

/* Are a and b the same file (device and inode)? */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int options_default_model(Options *o) {
    char msg[4800];
    if (options_imagenet(o)) return -1;
    /* --model builtin names the built-in model, as no --model does */
    if (o->model_path && !strcmp(o->model_path, "builtin")) o->model_path = NULL;
    if (o->model_path) { /* model_path and labels_path may point into model_buf, labels_buf */
        char weights[sizeof o->model_buf], labels[sizeof o->labels_buf];
        if (models_resolve(weights, sizeof weights, labels, sizeof labels, o->model_path, msg,
                           sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -1;
        }
        memcpy(o->model_buf, weights, sizeof weights);
        o->model_path = o->model_buf;
        if (!o->labels_path && labels[0]) {
            memcpy(o->labels_buf, labels, sizeof labels);
            o->labels_path = o->labels_buf;
        }
    }
    /* the built-in model and its demo scenes: the model when none was given, and the
     * demo folder that N / P step through without a photo */
    if (files_default_model(o->default_model, sizeof o->default_model, o->demo_dir,
                            sizeof o->demo_dir, msg, sizeof msg)) {
        o->default_model[0] = o->demo_dir[0] = '\0';
        if (o->model_path) return 0; /* not needed: N then steps through the photo's folder */
        fprintf(stderr, "vitlens: %s\n", msg);
        return -1;
    }
    /* the built-in model named by its path is the built-in model: its demo scenes too */
    if (o->model_path && !same_file(o->model_path, o->default_model)) return 0;
    o->model_path = o->default_model;
    /* the window opens on the first demo scene; the headless modes need an IMAGE */
    if (!o->image_path && !o->top_k && !o->export_dir &&
        files_step(o->first_demo, sizeof o->first_demo, o->demo_dir, 1) == 0)
        o->image_path = o->first_demo;
    return 0;
}
