/* opttable.c - the options' table (opttable.h) and what is derived from it: setting a
 * value, --help's option list and --list-options. A new option is a row here; the odd
 * ones have a parse function, above the table. */
#include "config/opttable.h"
#include "config/keys.h"
#include "render/colormap.h"
#include "view/mapkind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * The odd values: a parse function each (OPT_FUNC), and the printers (OPT_INFO) */

/* "A" or "A<s>B" with s one of seps, each a whole decimal integer (strtol, errno and the end
 * checked); b = a when the second is optional and absent. 0, or -1 when val is not so. */
static int parse_two(const char *val, const char *seps, int b_optional, long *a, long *b) {
    char *end;
    errno = 0;
    *a = strtol(val, &end, 10);
    if (errno || end == val) return -1;
    if (!*end && b_optional) {
        *b = *a;
        return 0;
    }
    if (!*end || !strchr(seps, *end)) return -1;
    const char *bs = end + 1;
    *b = strtol(bs, &end, 10);
    return errno || end == bs || *end ? -1 : 0;
}

/* --size S|HxW, px */
static int set_size(Options *o, const OptRow *r, const char *val) {
    long h, w;
    if (parse_two(val, "xX", 1, &h, &w) || h < 1 || w < 1 || h > VIT_MAX_INPUT ||
        w > VIT_MAX_INPUT) {
        fprintf(stderr,
                "vitlens: %s %s: expected S or HxW in px (e.g. 320 or 224x336), at most %d\n",
                r->name, val, VIT_MAX_INPUT);
        return 2;
    }
    o->load.image_h = (int)h, o->load.image_w = (int)w;
    return 0;
}

/* --patch ROW,COL, from 1 */
static int set_patch(Options *o, const OptRow *r, const char *val) {
    long row, col;
    if (parse_two(val, ",", 0, &row, &col) || row < 1 || col < 1 || row > 65536 || col > 65536) {
        fprintf(stderr, "vitlens: %s %s: expected ROW,COL from 1 (e.g. 7,8)\n", r->name, val);
        return 2;
    }
    o->lesson_row = (int)row, o->lesson_col = (int)col;
    return 0;
}

/* --shard K/N: this run takes images K, K+N, ... */
static int set_shard(Options *o, const OptRow *r, const char *val) {
    long k, n;
    if (parse_two(val, "/", 0, &k, &n) || n < 1 || n > 1000000 || k < 1 || k > n) {
        fprintf(stderr, "vitlens: %s %s: expected K/N with 1 <= K <= N\n", r->name, val);
        return 2;
    }
    o->shard_k = (int)k, o->shard_n = (int)n;
    return 0;
}

/* --colormap NAME: one of colormap_names */
static int set_colormap(Options *o, const OptRow *r, const char *val) {
    for (int k = 0; k < COLORMAP_COUNT; k++)
        if (!strcmp(val, colormap_names[k])) {
            o->colormap = k;
            return 0;
        }
    fprintf(stderr, "vitlens: %s %s: expected ", r->name, val);
    for (int k = 0; k < COLORMAP_COUNT; k++)
        fprintf(stderr, "%s%s",
                k == 0                   ? ""
                : k + 1 < COLORMAP_COUNT ? ", "
                                         : " or ",
                colormap_names[k]);
    fputc('\n', stderr);
    return 2;
}

/* --class ID|NAME: resolved against the labels once the model loads */
static int set_class(Options *o, const OptRow *r, const char *val) {
    if (!*val) {
        fprintf(stderr, "vitlens: %s needs a class index or name\n", r->name);
        return 2;
    }
    o->class_arg = val;
    return 0;
}

/* --ablate, --drop-patches, ...: the interventions (interv.h) */
static int set_interv(Options *o, const OptRow *r, const char *val) {
    char msg[600];
    int rc = interv_parse(&o->interv, r->name, val, msg, sizeof msg);
    if (rc < 0) fprintf(stderr, "vitlens: %s\n", msg);
    if (rc > 0) fprintf(stderr, "vitlens: %s: not an intervention (the options' table)\n", r->name);
    return rc ? 2 : 0;
}

static int info_help(Options *o, const OptRow *r, const char *val) {
    (void)o, (void)r, (void)val;
    options_usage(stdout);
    return 1;
}

static int info_version(Options *o, const OptRow *r, const char *val) {
    (void)o, (void)r, (void)val;
    printf("vitlens %s\n", VITLENS_VERSION);
    return 1;
}

static int info_list_kinds(Options *o, const OptRow *r, const char *val) {
    (void)o, (void)r, (void)val;
    keys_list_kinds(stdout);
    return 1;
}

static int info_list_commands(Options *o, const OptRow *r, const char *val) {
    (void)o, (void)r, (void)val;
    keys_list_commands(stdout);
    return 1;
}

static int info_list_options(Options *o, const OptRow *r, const char *val) {
    (void)o, (void)r, (void)val;
    opt_list(stdout);
    return 1;
}

static void export_tags(FILE *f); /* --export's help_more, below the table */

/* ---------------------------------------------------------------------------
 * The table, in --help's order */

/* offsetof(Options, field), and a compile error (an array of size -1) unless the field is of
 * the type the row's kind stores */
#define OFF(field, type)                                                                           \
    (offsetof(Options, field) + 0 * sizeof(char[_Generic(((Options *)0)->field, type : 1, default  \
                                                         : -1)]))
/* the modes of CLIP's options and of the interventions (the model as changed) */
#define CLIP_MODES   (OPT_WINDOW | OPT_TOP | OPT_EXPORT | OPT_EVAL | OPT_AGREEMENT)
#define INTERV_MODES (OPT_WINDOW | OPT_TOP | OPT_EXPORT | OPT_EVAL | OPT_AGREEMENT)
#define EVAL_MODES   (OPT_EVAL | OPT_EVAL_MERGE)

/* The rows by what they set: a string, a flag, a number in a range, or a function. */
#define STR(n, a, g, m, field, h)                                                                  \
    { n, NULL, a, g, m, OPT_STRING, OFF(field, const char *), 0, 0, NULL, NULL, h, NULL }
#define FLAG(n, g, m, field, h)                                                                    \
    { n, NULL, NULL, g, m, OPT_FLAG, OFF(field, int), 0, 0, NULL, NULL, h, NULL }
#define INT(n, a, g, m, field, lo, hi, e, h)                                                       \
    { n, NULL, a, g, m, OPT_INT, OFF(field, int), lo, hi, e, NULL, h, NULL }
#define FLT(n, a, g, m, field, lo, hi, e, h)                                                       \
    { n, NULL, a, g, m, OPT_FLOAT, OFF(field, float), lo, hi, e, NULL, h, NULL }
#define FUNC(n, a, g, m, fn, h)                                                                    \
    { n, NULL, a, g, m, OPT_FUNC, 0, 0, 0, NULL, fn, h, NULL }
#define INFO(n, alias, fn, h)                                                                      \
    { n, alias, NULL, "info", 0, OPT_INFO, 0, 0, 0, NULL, fn, h, NULL }

const OptRow OPTIONS[] = {
    /* the model */
    STR("--model", "PATH|NAME", "model", 0, model_path,
        "weights (.safetensors, timm or Hugging Face names: ViT, DeiT with or without "
        "distillation, DINO, DINOv2 with or without registers; or a PyTorch checkpoint .pth / "
        ".bin: also torchvision's ViTs and the notebooks' layouts, see --layout); config.json "
        "beside it is read. A NAME is a model downloaded by scripts/download-model.sh: "
        "MODELS/NAME/, with its labels.txt (MODELS: see the environment below) (default, or "
        "--model builtin: the built-in model, ASSETS/default/model.safetensors, on its demo "
        "scenes)"),
    STR("--labels", "FILE", "model", 0, labels_path,
        "class names, one per line (ImageNet synset lines are fine); default: the names in "
        "config.json, else ImageNet-1k's for a timm or torchvision head of 1000 classes "
        "(assumed, and said so)"),
    STR("--layout", "FILE", "model", 0, load.layout_path,
        "a layout (JSON) naming the checkpoint's tensors, for a ViT of your own "
        "(docs/your-own-vit.md); default: timm's, transformers' or the first of "
        "ASSETS/layouts/ that matches"),
    INT("--heads", "N", "model", 0, load.n_heads, 1, 100000, "a positive integer",
        "number of attention heads (default: config.json, else width/64)"),
    FUNC("--size", "S|HxW", "model", 0, set_size,
         "run the model at this input size in px, each side a multiple of the patch size (e.g. "
         "320 or 224x336); the position embedding is resampled bicubically as timm (or "
         "transformers) does (default: config.json's size, else the training size)"),
    FLAG("--whole", "model", 0, load.whole_image,
         "keep the whole photo: resize it to the input size without cropping (timm's crop_mode "
         "squash, crop_pct 1)"),
    /* how the maps look */
    FLT("--opacity", "A", "display", 0, opacity, 0.0, 1.0, "a number in [0, 1]",
        "heatmap opacity in [0, 1] (default 0.6)"),
    /* [0, 1): 0x1.fffffep-1 is the largest float below 1 */
    FLT("--discard", "R", "display", 0, discard, 0.0, 0x1.fffffep-1, "a number in [0, 1)",
        "rollout's discard ratio in [0, 1): that fraction of the smallest fused attention "
        "weights to patches is zeroed per layer (default 0)"),
    FUNC("--colormap", "NAME", "display", 0, set_colormap,
         "viridis (default), inferno, magma, turbo or greys"),
    FLAG("--bilinear", "display", 0, bilinear,
         "upsample maps bilinearly between patch centres (default: nearest, every patch one "
         "flat cell)"),
    FLAG("--ignore-orientation", "model", 0, ignore_orientation,
         "run on a photo's pixels as stored, not turned upright by its EXIF orientation (as "
         "PIL and timm do; default: upright)"),
    FUNC("--class", "ID|NAME", "display", 0, set_class,
         "the class the class-specific maps explain (the kinds above): a class index from 0, "
         "or a name as the labels give it, whole or one of its comma-separated names (\"tiger "
         "cat\"); default: the top-1 class. The window opens on a class-specific map"),
    STR("--contrast", "A,B", "display", OPT_WINDOW | OPT_EXPORT, contrast_arg,
        "the class-specific maps explain logit A - logit B, why A rather than B (A and B as "
        "--class takes them: \"tiger cat,tabby\", \"282,281\"); file names A-vs-B "
        "(class282-vs-class281_chefer.png). The window opens on such a map, the classes "
        "resolved again for each model; a click on a class ends it"),
    STR("--similar", "IMAGE2", "display", OPT_WINDOW | OPT_EXPORT, similar_path,
        "the class-specific maps explain cos(e, e'), e the photo's pooled embedding (what the "
        "head reads, or CLIP's projection) and e' IMAGE2's, held fixed: which patches make the "
        "two alike; a backbone without a head too (DINO, DINOv2/v3). Prints the cosine; file "
        "names similar-to-STEM2 (STEM2: IMAGE2's name). With one IMAGE, IMAGE2's maps (the "
        "cosine with IMAGE's e) go into DIR/STEM2/. The window opens the compare view with "
        "IMAGE2 in pane B, each pane's class-specific maps explaining the cosine seen from "
        "its photo"),
    STR("--compare", "MODEL2", "compare", OPT_WINDOW | OPT_TOP | OPT_EXPORT, compare_model,
        "side by side: a second pane, the photo through MODEL2 (a path or a NAME as --model "
        "takes it). The window opens the compare view: the same map kind, layer and head by "
        "relative depth, one patch cursor mapped through each model's crop and grid, A - B when "
        "the grids are one, Spearman and the top-10% IoU on the status line (\\ toggles it, Esc "
        "leaves). --top prints both models' top-K; --export DIR writes each pane's maps into "
        "DIR/a/ and DIR/b/ as --export alone would, their agreement (compare.csv: B's maps on "
        "A's grid at the same place of the photo, layers by relative depth), A - B where the "
        "grids agree (DIR/diff/) and compare_sheet.png"),
    STR("--compare-image", "IMAGE2", "compare", OPT_WINDOW | OPT_TOP | OPT_EXPORT, compare_image,
        "side by side: a second pane, IMAGE2 through the model (or --compare's MODEL2); as "
        "--compare"),
    STR("--save-dir", "DIR", "window", 0, save_dir,
        "where S saves the view and Ctrl+R its recordings (default: the current directory)"),
    /* CLIP (view/clip.h): zero-shot labels and a phrase to explain */
    STR("--classes", "NAMES", "clip", CLIP_MODES, clip.classes,
        "CLIP: zero-shot classes, comma-separated (\"cat, dog, espresso cup\"), each put in the "
        "template and embedded by the text tower; the top-5 panel and --top give "
        "softmax(logit_scale * cos(image, text)) over them (SigLIP: sigmoid(logit_scale * cos + "
        "logit_bias) of each class alone, 64 tokens; they do not sum to 1). --classes "
        "imagenet: the 1000 ImageNet classes with the 7 templates the CLIP authors selected; "
        "imagenet80: the paper's 80 (80000 texts: minutes; the lists are ASSETS/clip/, MIT "
        "licence)"),
    STR("--prompts", "FILE", "clip", CLIP_MODES, clip.prompts,
        "CLIP: the classes from a file, one per line (# comments)"),
    STR("--template", "T", "clip", CLIP_MODES, clip.template_,
        "the classes' template, {} the name (default \"a photo of a {}.\")"),
    STR("--templates", "FILE", "clip", CLIP_MODES, clip.templates,
        "several templates, one per line: each class's embedding is the mean of their "
        "normalised embeddings (the CLIP paper's prompt ensembling)"),
    STR("--text", "PHRASE", "clip", CLIP_MODES, clip.text,
        "CLIP: the class-specific maps explain this phrase (its logit is the score; it joins "
        "the classes, last) for --export, --eval, --top and the window; text past 77 tokens is "
        "cut, with a notice"),
    STR("--vocab", "PATH", "clip", CLIP_MODES, clip.vocab,
        "CLIP's vocabulary: vocab.json + merges.txt (a file or their folder) or "
        "bpe_simple_vocab_16e6.txt.gz (default: beside the model, or in its tokenizer/ "
        "folder)"),
    /* the interventions (app/view/interv.c) */
    FUNC("--ablate", "L:H[,L:H...]", "what-if", INTERV_MODES, set_interv,
         "what if? Run the model with these heads ablated (layer, head from 1): the head's "
         "output zeroed before the projection (Michel et al. 2019; transformers' head_mask). "
         "The interventions apply to --top, --export, --eval and the window"),
    FUNC("--drop-patches", "R,C[;R,C...]", "what-if", INTERV_MODES, set_interv,
         "take these patches (row, column from 1) out of the token sequence; the others keep "
         "their position embeddings. Maps show a dropped patch hatched (NaN in the .npy "
         "files)"),
    FUNC("--fill-patches", "R,C[;R,C...]", "what-if", INTERV_MODES, set_interv,
         "set these patches to the mean colour (0 after normalisation, as --eval's deletion); "
         "they stay in the sequence"),
    FUNC("--pos-embed", "MODE", "what-if", INTERV_MODES, set_interv,
         "shuffle: the patches' position embeddings shuffled among them (seeded, --pos-seed); "
         "zero: no position embedding at all"),
    FUNC("--pos-seed", "N", "what-if", INTERV_MODES, set_interv,
         "the seed of --pos-embed shuffle (default 0)"),
    FUNC("--temperature", "L:TAU", "what-if", INTERV_MODES, set_interv,
         "attention of layer L as softmax(scores / TAU), TAU > 0"),
    /* the headless modes */
    INT("--top", "K", "top", OPT_TOP, top_k, 1, 100000, "a positive integer",
        "print the K most probable classes and exit, one per line:\n"
        "  RANK PROB CLASS_ID LABEL     e.g. \"1 0.6123 281 tabby, tabby cat\"\n"
        "RANK from 1, PROB the softmax probability (SigLIP: the class's own sigmoid), CLASS_ID "
        "from 0, LABEL the rest of the line (absent without class names)"),
    {"--export", NULL, "DIR", "export", OPT_EXPORT, OPT_STRING, OFF(export_dir, const char *), 0, 0,
     NULL, NULL,
     "write every map as a PNG into DIR and exit (a video, any file GStreamer decodes: each "
     "frame's into DIR/frame_NNNNNN/, NNNNNN its index from 0, and its time and top-5 in "
     "DIR/frames.csv; --top prints each frame's after \"# frame N T s\"), and beside each "
     "its raw values, before normalisation, as .npy (float32, [gh, gw]; [Sh, Sw] for a pixel map; "
     "colours [gh, gw, "
     "4], A the foreground): L01_H01.png ... (layer, head from 1), L01_mean/max/min.png (head "
     "fusions) for attention; for every other kind its tag, per layer (L01_rollout.png, mean "
     "fusion, --discard) or once, and for the class-specific kinds the class of --class "
     "(default: the top-1, class281_chefer.png, class281_L01_logit-lens.png). The tags:",
     export_tags},
    INT("--every", "N", "export", OPT_TOP | OPT_EXPORT, every, 1, 1000000, "a positive integer",
        "a video: only every Nth frame, frames 0, N, 2N, ... of the stream (from 0)"),
    FLT("--fps", "F", "export", OPT_TOP | OPT_EXPORT, fps, 0.001, 1000.0,
        "a number in [0.001, 1000]",
        "a video: at most F frames per second of it, the first frame at or after each 1/F s of "
        "its timestamps (every frame when it has fewer)"),
    STR("--camera", "DEVICE", "export", OPT_WINDOW | OPT_TOP | OPT_EXPORT, camera,
        "a camera's frames instead of IMAGE (V4L2: /dev/video0): in the window, every view "
        "follows them (Space pauses); with --top or --export, run as a video's. The newest "
        "frame when the model is slower than the camera. Stop it with --frames N or Ctrl+C"),
    INT("--frames", "N", "export", OPT_TOP | OPT_EXPORT, max_frames, 1, 1000000000,
        "a positive integer",
        "a video or camera: stop after N frames (those --every or --fps keep)"),
    STR("--lesson-export", "DIR", "lesson", OPT_LESSON, lesson_export_dir,
        "the lesson (how the ViT computes, step by step, on IMAGE) as slides, then exit: every "
        "step's picture NN_STEP.png (1280x720), its numbers NN_STEP[_PART].npy (float32), "
        "steps.json (names, captions, shapes) and lesson.md (the captions and pictures)"),
    STR("--lesson", "FILE", "lesson", OPT_WINDOW | OPT_LESSON, lesson_path,
        "a lesson script (docs/lessons.md): the window opens in the lesson view on its steps; "
        "with --lesson-export, its steps are written (default: assets/default/lesson.txt, Page "
        "Down in the window)"),
    INT("--layer", "L", "lesson", OPT_LESSON, lesson_layer, 1, 65536, "a positive integer (from 1)",
        "the lesson's block, from 1, for every step of the default lesson (default: "
        "each step's line)"),
    INT("--head", "H", "lesson", OPT_LESSON, lesson_head, 1, 65536, "a positive integer (from 1)",
        "the lesson's head, from 1, for every step of the default lesson (default: "
        "each step's line)"),
    FUNC("--patch", "ROW,COL", "lesson", OPT_LESSON, set_patch,
         "the lesson's patch and query token, from 1, for every step of the default "
         "lesson (default: each step's line, else the centre)"),
    FLAG("--eval", "eval", OPT_EVAL, eval,
         "which map can I trust? For every map kind with a value per patch (the last layer, "
         "mean of the heads, the CLS token as the query) and two baselines (random, centred "
         "Gaussian), on the class the model predicts (or --class), then exit: perturbation "
         "tests (Chefer et al. 2021: patches set to the mean in steps of 10%, most / least "
         "relevant first), deletion and insertion (Petsiuk et al. 2018), localisation with "
         "--masks (pointing game, energy, top-k IoU) and the sanity check (Adebayo et al. "
         "2018: head and blocks re-initialised from the top, Spearman rank correlation); a "
         "markdown table on stdout, an unreadable image is skipped"),
    STR("--eval-out", "DIR", "eval", EVAL_MODES | OPT_AGREEMENT, eval_out,
        "also write the rows as CSV (images, perturbation, localisation, sanity), the table as "
        "summary.md and the plots as PNG; with --agreement, agreement.csv, agreement.png, the "
        "per-photo rows and maps"),
    STR("--masks", "DIR", "eval", EVAL_MODES, masks_dir,
        "ground-truth masks: DIR/NAME_mask.png (else DIR/NAME.png) for the photo NAME.*, the "
        "photo's size, inside where red >= 128"),
    FUNC("--shard", "K/N", "eval", EVAL_MODES | OPT_AGREEMENT, set_shard,
         "evaluate images K, K+N, K+2N, ... (from 1) of the sorted list"),
    INT("--eval-steps", "N", "eval", EVAL_MODES, eval_steps, 2, 1000, "an integer from 2 to 1000",
        "deletion and insertion steps (default 20)"),
    FLAG("--no-sanity", "eval", EVAL_MODES, no_sanity,
         "leave out the sanity check (the slowest part)"),
    FLAG("--eval-merge", "eval", OPT_EVAL_MERGE, eval_merge,
         "combine the --eval-out folders of shards (the arguments) into the table one run "
         "would print; with --eval-out, one folder. Shards of --agreement (their folders hold "
         "agreement_pairs.csv) into its matrix"),
    FLAG("--agreement", "eval", OPT_AGREEMENT, agreement,
         "do the class-specific methods agree? Each one's map of the class the model predicts "
         "(or --class) on every photo, reduced to the patches as --eval does, and a random "
         "map (uniform, seeded per photo: the control); the Spearman rank correlation of "
         "every pair per photo, its mean and standard deviation over the photos as a "
         "markdown matrix on stdout, with the IoU of the top 10% patches; with --eval-out, "
         "agreement.csv, a heatmap agreement.png and each photo's maps as .npy, then exit"),
    /* the rest */
    FLAG("--stdin-drops", "window", 0, stdin_drops,
         "read file paths from stdin, one per line, as if dropped on the window (for scripts "
         "and tests)"),
    INFO("--list-kinds", NULL, info_list_kinds,
         "print the map kinds, one per line, and exit: TAG, KEY (- for E only), GROUP "
         "(attention, class, tokens), NAME, TITLE and NEEDS (- for any model, classifier, "
         "map-head), separated by tabs"),
    INFO("--list-commands", NULL, info_list_commands,
         "print the window's commands (its palette, Ctrl+P), one per line, and exit: VIEW "
         "(explorer, lesson), TAG, KEY (- for none), NAME and NEEDS (- for any model, "
         "classifier, clip, map-head), separated by tabs"),
    INFO("--list-options", NULL, info_list_options,
         "print these options, one per line, and exit: NAME, ALIAS, ARG (- for none), GROUP "
         "and MODES (those it goes with: window, top, export, eval, eval-merge, lesson-export, "
         "agreement; any), separated by tabs"),
    INFO("--version", NULL, info_version, "print the version and exit"),
    INFO("--help", "-h", info_help, "this help"),
    {"--", NULL, NULL, "info", 0, OPT_END, 0, 0, 0, NULL, NULL,
     "what follows is an IMAGE or FOLDER, even if it starts with -", NULL},
};
const int OPTION_COUNT = (int)(sizeof OPTIONS / sizeof OPTIONS[0]);
_Static_assert(sizeof OPTIONS / sizeof OPTIONS[0] <= OPTIONS_MAX, "OPTIONS_MAX too small");

/* ---------------------------------------------------------------------------
 * Looking up and setting */

const OptRow *opt_find(const char *arg) {
    for (int i = 0; i < OPTION_COUNT; i++)
        if (!strcmp(arg, OPTIONS[i].name) || (OPTIONS[i].alias && !strcmp(arg, OPTIONS[i].alias)))
            return &OPTIONS[i];
    return NULL;
}

int opt_set(Options *o, const OptRow *r, const char *val) {
    /* every number is parsed whole (strtol/strtof with end and errno checked): "12x" or
     * "1e99" is an error naming the option, never a silent prefix or overflow */
    char *field = (char *)o + r->off, *end = NULL;
    errno = 0;
    switch (r->kind) {
    case OPT_FLAG: *(int *)field = 1; return 0;
    case OPT_STRING: *(const char **)field = val; return 0;
    case OPT_INT: {
        long n = strtol(val, &end, 10);
        if (errno || !*val || *end || n < r->lo || n > r->hi) break;
        *(int *)field = (int)n;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(val, &end);
        if (errno || !*val || *end || !(x >= r->lo && x <= r->hi)) break;
        *(float *)field = x;
        return 0;
    }
    case OPT_FUNC: return r->parse(o, r, val);
    case OPT_INFO:
    case OPT_END: return 0; /* options_parse's own */
    }
    fprintf(stderr, "vitlens: %s %s: expected %s\n", r->name, val, r->expect);
    return 2;
}

/* ---------------------------------------------------------------------------
 * --help and --list-options */

static const char *const MODE_HELP[] = {"the window",   "--top",           "--export",   "--eval",
                                        "--eval-merge", "--lesson-export", "--agreement"};
static const char *const MODE_LIST[] = {"window",     "top",           "export",   "eval",
                                        "eval-merge", "lesson-export", "agreement"};
#define N_MODES ((int)(sizeof MODE_HELP / sizeof MODE_HELP[0]))

void opt_mode_names(char *buf, size_t n, unsigned modes) {
    /* counted first, so that the last two are joined by "or" rather than a comma */
    int count = 0, k = 0;
    size_t len = 0;
    buf[0] = '\0';
    for (int m = 0; m < N_MODES; m++) count += !!(modes & (1u << m));
    for (int m = 0; m < N_MODES && len < n; m++)
        if (modes & (1u << m)) {
            const char *sep = k == 0 ? "" : k == count - 1 ? " or " : ", ";
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, MODE_HELP[m]);
            k++;
        }
}

/* A row's help from column col: each line of text wrapped at 80 columns, indented 18; a
 * line that starts with a space as it is. */
static void print_help(FILE *f, const char *text, int col) {
    char line[2048];
    while (*text) {
        size_t len = strcspn(text, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, text);
        if (line[0] == ' ')
            fprintf(f, "%*s%s\n", col > 18 ? 0 : 18 - col, "", line);
        else
            keys_print_wrapped(f, line, 18, col);
        text += len + (text[len] == '\n');
        col = 18;
        if (*text) fprintf(f, "%*s", col, "");
    }
}

void opt_usage(FILE *f) {
    for (int i = 0; i < OPTION_COUNT; i++) {
        const OptRow *r = &OPTIONS[i];
        char label[128];
        snprintf(label, sizeof label, "%s%s%s%s%s", r->alias ? r->alias : "", r->alias ? ", " : "",
                 r->name, r->arg ? " " : "", r->arg ? r->arg : "");
        /* the help at column 18 two spaces after the label at least (a 15-character one
         * had one: "--list-commands print", which the man page's test took for no option),
         * or two spaces after a longer label (print_help puts the second: a space before the
         * first word past the indent) */
        size_t n = strlen(label);
        int col = n < 15 ? fprintf(f, "  %-16s", label)
                         : fprintf(f, "  %s%s", label, n == 15 ? "  " : " ");
        print_help(f, r->help, col);
        if (r->help_more) r->help_more(f);
    }
}

void opt_list(FILE *f) {
    /* tab-separated, one option a line: a stable format for scripts and the tests */
    for (int i = 0; i < OPTION_COUNT; i++) {
        const OptRow *r = &OPTIONS[i];
        fprintf(f, "%s\t%s\t%s\t%s\t", r->name, r->alias ? r->alias : "-", r->arg ? r->arg : "-",
                r->group);
        for (int m = 0, k = 0; m < N_MODES; m++)
            if (r->modes & (1u << m)) fprintf(f, "%s%s", k++ ? "," : "", MODE_LIST[m]);
        fputs(r->modes ? "\n" : "any\n", f);
    }
}

/* --export's help after "The tags:": every kind's tag from the map kinds' table, then the
 * overviews. */
static void export_tags(FILE *f) {
    char tags[1024];
    size_t len = 0;
    for (int k = 1; k < MAP_KIND_COUNT && len < sizeof tags; k++) /* the first row untagged */
        len += (size_t)snprintf(tags + len, sizeof tags - len, "%s%s%s", k > 1 ? ", " : "",
                                MAP_KINDS[k].tag, k + 1 < MAP_KIND_COUNT ? "" : ".");
    fprintf(f, "%18s", "");
    keys_print_wrapped(f, tags, 18, 18);
    fprintf(f, "%18s", "");
    print_help(f,
               "For slides: L01_heads.png (every head of a layer in a grid) and a contact sheet "
               "(layers x heads) per kind with per-head maps, contact_sheet.png, "
               "contact_sheet_TAG.png, and with a head contact_sheet_class281.png (a column per "
               "class-specific kind); logit_lens.csv and high_norm_tokens.csv. Several IMAGEs: "
               "each into DIR/NAME/, with the feature PCA over all of them as L01_pca-joint. With "
               "a head, which heads matter for the class: head_importance.csv/.png (the drop in "
               "its probability with each head ablated alone, layers x heads) and "
               "head_pruning.csv/.png (the least important heads pruned first, Michel et al. "
               "2019)",
               18);
}
