/* fuzz_layout.c - libFuzzer target: a layout file (docs/your-own-vit.md) against a fixed
 * tiny model.
 *
 * vit_load with VitLoadOptions.layout_path reads the user's layout (engine/load/layout.c):
 * its roles name the model's tensors ({l} a block, {h} a head, {p} a prefix, lists of
 * alternatives), its switches say how to read them; the tensors are read in place
 * (names.c) or converted (per-head lists, separate query/key/value, a linear patch
 * embedding, a transposed image projection, F16/BF16 to F32). The model is a timm ViT
 * (D 8, 2 blocks, patch 4, a 2 x 2 grid, 3 classes) in F32, F16 or BF16, plus tensors of
 * zero elements with a huge other dim ("zero.*": [0, 2^40], [2^40, 0], ...), so that a
 * layout can send any role, or several, to any tensor.
 *
 * An input that starts with '{' is the layout's text (mutated with layout.dict, seeded by
 * assets/layouts/; its last byte picks the dtype). Any other is a program of choices
 * (fuzzlib.h) that writes the layout: the roles (from layout.c's own table, ld_role) each
 * to its own name, another tensor's, another role's pattern (the same tensor for several
 * roles), a per-head pattern, a list of alternatives, an odd string or a non-string; the
 * switches with their values and odd ones. The checks are fuzz_safetensors's (fuzzlib.c):
 * a refusal keeps the error contract and leaves the Vit zeroed, an accepted model adds up
 * and runs every map. */
#include "fuzzlib.h"
#include "load/loader.h" /* ld_role, N_SLOTS */
#include "testlib.h"     /* model_tiny, model_bytes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT_OUT_MAX (64u << 10)

/* --- the model --------------------------------------------------------------------- */

static const char *const dtypes[] = {"F32", "F16", "BF16"};
#define N_MODELS 3

static Model model;
static MemFile model_file[N_MODELS], layout_file;

static void fail(const char *what) {
    fprintf(stderr, "fuzz_layout: %s\n", what);
    abort();
}

static void make_models(void) {
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[3];
    } zero[] = {{"zero.a", 2, {0, (int64_t)1 << 40}},
                {"zero.b", 2, {(int64_t)1 << 40, 0}},
                {"zero.c", 1, {0}},
                {"zero.d", 3, {1, 0, 8}},
                {"zero.e", 2, {0, 48}}};
    for (int k = 0; k < N_MODELS; k++) {
        model_tiny(&model, 8, 2, 4, 2, 16, 3);
        for (size_t i = 0; i < sizeof zero / sizeof *zero; i++)
            model_add(&model, zero[i].name, "F32", zero[i].ndim, zero[i].shape);
        model_set_dtype(&model, dtypes[k]);
        size_t n;
        uint8_t *b = model_bytes(&model, &n);
        if (!b) fail("cannot make the tiny model");
        memfile_init(&model_file[k], "model.safetensors");
        memfile_set(&model_file[k], b, n);
        free(b);
        Vit vit;
        VitError err;
        VitLoadOptions opt = {.n_heads = 2};
        if (vit_load(&vit, model_file[k].path, &opt, &err)) fail(err.msg);
        vit_free(&vit);
    }
    memfile_init(&layout_file, "layout.json");
}

/* --- the layout, from choices ----------------------------------------------------------- */

#define PICK(n)   pick(c, (unsigned)(n))
#define RARELY(n) (PICK(n) == (n)-1)
#define COUNT(a)  (sizeof(a) / sizeof *(a))

/* switches: each value a JSON text, the first the usual one */
static const struct {
    const char *key;
    const char *values[8];
} switches[] = {
    {"naming", {"\"timm\"", "\"hf\"", "\"\"", "1", "null"}},
    {"attention_scale", {"\"head_dim\"", "\"dim\"", "\"x\""}},
    {"mlp_activation",
     {"\"gelu\"", "\"gelu_tanh\"", "\"quick_gelu\"", "\"relu\"", "\"swish\"", "7"}},
    {"head_activation", {"\"none\"", "\"tanh\"", "\"\""}},
    {"patch_embedding", {"\"conv\"", "\"linear\"", "\"\""}},
    {"flatten", {"\"c p1 p2\"", "\"p1 p2 c\"", "\"p1 c p2\""}},
    {"image_proj", {"\"linear\"", "\"x @ proj\"", "\"x\""}},
    {"layer_norm_eps", {"1e-6", "0", "-1", "1e-300", "1", "2", "\"1e-6\"", "1e999"}},
    {"position_antialias", {"false", "true", "0"}},
    {"clip_configs", {"true", "false"}},
    {"detect", {"\"cls_token\"", "\"{p}cls_token\"", "\"nothing\"", "\"\"", "3"}},
    {"prefix",
     {"\"\"", "\"module.\"", "[\"\", \"x.\"]", "[]",
      "[\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"\"]", "7"}},
    {"preprocess",
     {"{\"resize\": 256, \"crop\": 224, \"mean\": [0.5, 0.5, 0.5], \"std\": [0.5, 0.5, 0.5], "
      "\"interpolation\": \"bilinear\"}",
      "{\"resize\": 1, \"crop\": 1e308}", "{\"std\": [0, 0, 0]}", "{\"mean\": [1, 2]}",
      "{\"interpolation\": \"nearest\"}", "[]", "{\"resize\": 1e-300, \"crop\": 1e-300}"}},
    {"labels", {"[\"a\", \"b\", \"c\"]", "[]", "[1, null]", "\"cat\"", "[\"a\"]"}},
    {"unsupported", {"{\"head.weight\": \"x\"}", "{\"nothing\": \"x\"}", "[]", "{\"a\": 1}"}},
};

static const char *const odd_names[] = {"",
                                        "{l}",
                                        "{h}",
                                        "{p}",
                                        "{p}{p}{p}{p}",
                                        "{l}{l}{l}{l}{h}{h}",
                                        "{",
                                        "}",
                                        "blocks.{l}",
                                        "blocks.{l}.{h}.weight"};
static const char *const non_strings[] = {"3", "null", "{}", "[]", "[3]", "[\"\", 3]", "true"};

static void name_value(Out *o, Choices *c, int role, int depth);

/* One tensor name (or not) for the role. */
static void name_value(Out *o, Choices *c, int role, int depth) {
    unsigned k = depth ? PICK(6) : PICK(8);
    char nm[LD_NAME_BYTES];
    switch (k) {
    case 0: /* its own name: the identity, timm's */
        out_printf(o, "\"%s\"", ld_role((Slot)role));
        return;
    case 1: /* another tensor of the model, by its full name */
        out_printf(o, "\"%s\"", model.t[PICK(model.n)].name);
        return;
    case 2: /* another role's pattern: one tensor for several roles */
        out_printf(o, "\"%s\"", ld_role((Slot)PICK(N_SLOTS)));
        return;
    case 3: { /* a role's pattern with {h} for {l}, or {h} added: per-head lists */
        const char *r = ld_role((Slot)(RARELY(2) ? (unsigned)role : PICK(N_SLOTS))),
                   *at = strstr(r, "{l}");
        if (at && !RARELY(4))
            snprintf(nm, sizeof nm, "%.*s{h}%s", (int)(at - r), r, at + 3);
        else
            snprintf(nm, sizeof nm, "%s.{h}", r);
        out_printf(o, "\"%s\"", nm);
        return;
    }
    case 4: /* with the prefix */ out_printf(o, "\"{p}%s\"", ld_role((Slot)role)); return;
    case 5: { /* an odd string, or a long one */
        unsigned i = PICK(COUNT(odd_names) + 1);
        if (i < COUNT(odd_names)) {
            out_printf(o, "\"%s\"", odd_names[i]);
        } else {
            out_str(o, "\"");
            for (unsigned n = 100 + PICK(200); n; n--) out_str(o, "a");
            out_str(o, "\"");
        }
        return;
    }
    case 6: { /* a list of alternatives */
        unsigned n = 1 + PICK(4);
        out_str(o, "[");
        for (unsigned i = 0; i < n; i++) {
            if (i) out_str(o, ", ");
            name_value(o, c, role, depth + 1);
        }
        out_str(o, "]");
        return;
    }
    default: /* not a string */ out_str(o, non_strings[PICK(COUNT(non_strings))]); return;
    }
}

/* The layout: "name", "tensors" (every role as timm names it, or none; then some roles
 * rewritten, a role twice, a role that is none), switches. */
static void write_layout(Out *o, Choices *c) {
    out_str(o, "{");
    if (!RARELY(16)) out_str(o, "\"name\": \"fuzzed\", ");
    out_str(o, "\"tensors\": {");
    int all = !RARELY(4), first = 1;
    unsigned n_changed = PICK(5) + (RARELY(8) ? PICK(32) : 0);
    int changed[64], n_ch = 0;
    for (unsigned i = 0; i < n_changed && n_ch < 64; i++)
        changed[n_ch++] = (int)PICK(N_SLOTS + 1); /* N_SLOTS: not a role */
    for (int r = 0; r < N_SLOTS + 1; r++) {
        int mine = -1;
        for (int i = 0; i < n_ch; i++)
            if (changed[i] == r) mine = i;
        if (mine < 0 && (!all || r == N_SLOTS)) continue;
        if (!first) out_str(o, ", ");
        first = 0;
        out_printf(o, "\"%s\": ", r < N_SLOTS ? ld_role((Slot)r) : "blocks.{l}.not_a_role");
        if (mine < 0)
            out_printf(o, "\"%s\"", ld_role((Slot)r));
        else
            name_value(o, c, r < N_SLOTS ? r : 0, 0);
    }
    out_str(o, "}");
    for (size_t s = 0; s < COUNT(switches); s++) {
        if (!RARELY(4)) continue;
        unsigned n = 0;
        while (n < 8 && switches[s].values[n]) n++;
        out_printf(o, ", \"%s\": %s", switches[s].key, switches[s].values[PICK(n)]);
    }
    out_str(o, "}");
}

/* --- entry point ------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!layout_file.path[0]) make_models();
    int k;
    VitLoadOptions opt = {.n_heads = 2};
    if (size && data[0] == '{') { /* the layout's text */
        memfile_set(&layout_file, data, size);
        k = data[size - 1] % N_MODELS;
    } else {
        Choices ch = {.p = data, .n = size}, *c = &ch;
        Out o = {.max = LAYOUT_OUT_MAX};
        k = (int)PICK(N_MODELS);
        static const int heads[] = {2, 0, 1, 4, 8, 3};
        opt.n_heads = heads[RARELY(4) ? PICK(COUNT(heads)) : 0];
        write_layout(&o, c);
        fuzz_dump(o.p, o.n);
        memfile_set(&layout_file, o.p, o.n);
        free(o.p);
    }
    opt.layout_path = layout_file.path;
    fuzz_model_load(model_file[k].path, &opt);
    return 0;
}
