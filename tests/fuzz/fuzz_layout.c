/* fuzz_layout.c - libFuzzer target: layouts (docs/your-own-vit.md) against tiny models in
 * each shipped layout's names, with hostile shapes.
 *
 * vit_load reads a checkpoint through a layout (engine/load/layout.c): the user's
 * (VitLoadOptions.layout_path), or else the shipped ones (assets/layouts/, compiled in),
 * tried in turn. Its roles name the model's tensors ({l} a block, {h} a head, {p} a prefix,
 * lists of alternatives), its switches say how to read them; the tensors are read in place
 * (names.c) or converted (per-head lists, separate query/key/value, a linear patch
 * embedding, a transposed image projection, F16/BF16 to F32).
 *
 * The model: a timm ViT (D 8, 2 blocks, 2 heads, patch 4, a 2 x 2 grid, 3 classes) written
 * in the names of one shipped layout (a family: timm, hf, torchvision, clip-openai, the
 * notebooks' per-head lists and linear patch embedding, ...; CLIP's with ln_pre, the image
 * projection and logit_scale), in F32, F16 or BF16, then edited: a role's tensors (block 0's,
 * every block's and head's, or every tensor of the same shape) given a shape with a zero
 * dim and huge others ([2^53, 0], [0, 3 * 2^40], [2^61, 0], ...: no data, so a file of a few
 * KB), or removed. What converts them is reached: an input needs no --layout for that,
 * the shipped layouts take a hostile checkpoint as it comes.
 *
 * An input that starts with '{' is a layout's text (mutated with layout.dict, seeded by
 * assets/layouts/), up to a NUL; the family is the one whose "detect" tensor the text
 * names (the longest), and the bytes after the NUL are the model's choices (dtype, edits).
 * Any other input is a program of choices (fuzzlib.h): the family, dtype, heads, edits,
 * then the layout: one written from choices (the family's roles and switches, each kept
 * or changed: to another tensor, another role's pattern, a per-head pattern, a list of
 * alternatives, an odd string or a non-string), the family's shipped file as --layout,
 * none (the shipped layouts' detection), or another family's file. The checks are
 * fuzz_safetensors's (fuzzlib.c): a refusal keeps the error contract and leaves the Vit
 * zeroed, an accepted model adds up and runs every map. */
#include "fuzzlib.h"
#include "load/loader.h" /* ld_role, N_SLOTS, cJSON */
#include "testlib.h"     /* model_tiny, model_bytes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#define LAYOUT_OUT_MAX (64u << 10)
#define MAX_FAMILIES   16

/* the shipped layouts (layouts.c, generated from assets/layouts/) */
extern const char *const vit_layouts[];
extern const char *const vit_layout_files[];
extern const int vit_n_layouts;

#define PICK(n)   pick(c, (unsigned)(n))
#define RARELY(n) (PICK(n) == (n)-1)
#define COUNT(a)  (sizeof(a) / sizeof *(a))

static void fail(const char *what) {
    fprintf(stderr, "fuzz_layout: %s\n", what);
    abort();
}

/* --- the families: each shipped layout's names -------------------------------------- */

/* the tiny ViT: width, blocks, heads, patch, grid, MLP width, classes, CLIP's embedding */
enum { D = 8, L = 2, H = 2, P = 4, GRID = 2, F = 16, C = 3, E = 4 };

/* the switches: odd values, as JSON texts (the usual one: the family's) */
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
    {"labels",
     {"[\"a\", \"b\", \"c\"]", "[]", "[1, null]", "\"cat\"", "[\"a\"]", "\"torchvision\"",
      "\"timm\"", "\"\""}},
    {"unsupported", {"{\"head.weight\": \"x\"}", "{\"nothing\": \"x\"}", "[]", "{\"a\": 1}"}},
    {"position_prefix", {"\"cls\"", "\"all\"", "1"}},
    {"left_out", {"{\"head.weight\": \"x\"}", "{\"nothing\": \"x\"}", "[]", "{\"a\": 1}"}},
};

#define N_SWITCHES COUNT(switches)

typedef struct {
    const char *file;                  /* "clip-openai" */
    const char *text;                  /* its JSON */
    char detect[LD_NAME_BYTES];        /* its "detect" tensor (may hold {p}), or "" */
    char pat[N_SLOTS][LD_NAME_BYTES];  /* each role's first name, {p} the first prefix; "" */
    char *sw[N_SWITCHES];              /* each switch's JSON text, or NULL */
    int linear_patch, x_at_proj, clip; /* "patch_embedding": "linear", "x @ proj", CLIP's */
    int cls_pos_only;                  /* "position_prefix": "cls" (transformers' DINOv2 with
                                          registers): its model has register tokens */
    int cls_mean;                      /* "pooling": "cls_mean": its head is [C, 2D] */
    int glu_packed;                    /* "glu_packed": fc1 is [gate; value], [2F, D] */
    int rope;                          /* "rope" other than "none": registers, no pos_embed
                                          needed (DINOv3) */
    int no_cls;                        /* "class_token": false (SigLIP): pos_embed [N, D] */
} Family;

static Family fams[MAX_FAMILIES];
static int n_fams;
static const char *const dtypes[] = {"F32", "F16", "BF16"};
static MemFile model_file, layout_file, shipped_file[MAX_FAMILIES];

/* pattern with {p} replaced by prefix, {l} and {h} by l and h (kept when negative) */
static void expand(char *out, size_t n, const char *pat, int l, int h, const char *prefix) {
    size_t k = 0;
    for (const char *s = pat; *s && k + 1 < n; s++) {
        int v = s[1] == 'l' ? l : h;
        if (s[0] == '{' && (s[1] == 'p' || ((s[1] == 'l' || s[1] == 'h') && v >= 0)) &&
            s[2] == '}') {
            if (s[1] == 'p')
                k += (size_t)snprintf(out + k, n - k, "%s", prefix);
            else
                k += (size_t)snprintf(out + k, n - k, "%d", v);
            if (k >= n) k = n - 1;
            s += 2;
        } else {
            out[k++] = *s;
        }
    }
    out[k] = 0;
}

static void family_init(Family *f, int i) {
    f->file = vit_layout_files[i];
    f->text = vit_layouts[i];
    cJSON *root = cJSON_Parse(f->text);
    if (!root) fail("a shipped layout is not JSON");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "prefix");
    if (cJSON_IsArray(pre)) pre = pre->child;
    const char *prefix = cJSON_IsString(pre) ? pre->valuestring : "";
    for (int r = 0; r < N_SLOTS; r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, ld_role((Slot)r));
        if (cJSON_IsArray(v)) v = v->child;
        f->pat[r][0] = 0;
        if (cJSON_IsString(v)) expand(f->pat[r], LD_NAME_BYTES, v->valuestring, -1, -1, prefix);
    }
    for (size_t s = 0; s < N_SWITCHES; s++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, switches[s].key);
        f->sw[s] = v ? cJSON_PrintUnformatted(v) : NULL;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "detect");
    snprintf(f->detect, sizeof f->detect, "%s", cJSON_IsString(d) ? d->valuestring : "");
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(root, "patch_embedding");
    const cJSON *ip = cJSON_GetObjectItemCaseSensitive(root, "image_proj");
    f->linear_patch = cJSON_IsString(pe) && !strcmp(pe->valuestring, "linear");
    f->x_at_proj = cJSON_IsString(ip) && !strcmp(ip->valuestring, "x @ proj");
    f->clip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "clip_configs"));
    f->cls_pos_only = cJSON_GetObjectItemCaseSensitive(root, "position_prefix") != NULL;
    const cJSON *po = cJSON_GetObjectItemCaseSensitive(root, "pooling");
    f->cls_mean = cJSON_IsString(po) && !strcmp(po->valuestring, "cls_mean");
    f->glu_packed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "glu_packed"));
    const cJSON *ro = cJSON_GetObjectItemCaseSensitive(root, "rope");
    f->rope = cJSON_IsString(ro) && strcmp(ro->valuestring, "none") != 0;
    f->no_cls = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "class_token"));
    cJSON_Delete(root);
}

/* The family's tiny model: model_tiny's tensors under the family's names, in the shapes
 * its conversions expect. */
static void family_model(Model *m, const Family *f, const char *dtype) {
    static Model base;
    model_tiny(&base, D, L, P, GRID, F, C);
    memset(m, 0, sizeof *m);
    for (int r = 0; r < N_SLOTS; r++) {
        const char *pat = f->pat[r], *role = ld_role((Slot)r);
        if (!pat[0]) continue;
        int per_block = strstr(role, "{l}") != NULL, per_head = strstr(pat, "{h}") != NULL;
        for (int l = 0; l < (per_block ? L : 1); l++) {
            int64_t sh[4] = {0};
            int nd = -1;
            char nm[LD_NAME_BYTES];
            switch ((Slot)r) {
            case S_Q_W:
            case S_K_W:
            case S_V_W: nd = 2, sh[0] = per_head ? D / H : D, sh[1] = D; break;
            case S_Q_B:
            case S_K_B:
            case S_V_B: nd = 1, sh[0] = per_head ? D / H : D; break;
            case S_PATCH_W:
                if (f->linear_patch)
                    nd = 2, sh[0] = D, sh[1] = 3 * P * P;
                else
                    nd = 4, sh[0] = D, sh[1] = 3, sh[2] = P, sh[3] = P;
                break;
            case S_NORM_PRE_W:
            case S_NORM_PRE_B:
                if (f->clip) nd = 1, sh[0] = D;
                break;
            case S_IMG_PROJ_W:
                if (f->clip) nd = 2, sh[0] = f->x_at_proj ? D : E, sh[1] = f->x_at_proj ? E : D;
                break;
            case S_LOGIT_SCALE:
                if (f->clip) nd = 0;
                break;
            case S_REG: /* two registers: with a CLS-only position row, the grid stays square;
                           a rotary model's have no position rows (DINOv3 detects them) */
                if (f->cls_pos_only || f->rope) nd = 3, sh[0] = 1, sh[1] = 2, sh[2] = D;
                break;
            case S_POS: /* no CLS: a row per patch, transformers' nn.Embedding [N, D] */
                if (f->no_cls)
                    nd = 2, sh[0] = GRID * GRID, sh[1] = D;
                else
                    nd = 3, sh[0] = 1, sh[1] = 1 + GRID * GRID, sh[2] = D;
                break;
            case S_FC1_W: /* packed SwiGLU: [gate; value] */
            case S_FC1_B:
                nd = r == S_FC1_W ? 2 : 1, sh[0] = f->glu_packed ? 2 * F : F, sh[1] = D;
                break;
            case S_MAP_PROBE: nd = 3, sh[0] = 1, sh[1] = 1, sh[2] = D; break; /* SigLIP's head */
            case S_MAP_IN_W: nd = 2, sh[0] = 3 * D, sh[1] = D; break;
            case S_MAP_IN_B: nd = 1, sh[0] = 3 * D; break;
            case S_MAP_OUT_W: nd = 2, sh[0] = D, sh[1] = D; break;
            case S_MAP_FC1_W: nd = 2, sh[0] = F, sh[1] = D; break;
            case S_MAP_FC1_B: nd = 1, sh[0] = F; break;
            case S_MAP_FC2_W: nd = 2, sh[0] = D, sh[1] = F; break;
            case S_MAP_OUT_B:
            case S_MAP_LN_W:
            case S_MAP_LN_B:
            case S_MAP_FC2_B: nd = 1, sh[0] = D; break;
            case S_LS1:
            case S_LS2: nd = 1, sh[0] = D; break; /* LayerScale (transformers' DINOv2: detected) */
            case S_HEAD_W: /* [C, 2D] for [CLS ; mean] (Dinov2ForImageClassification) */
                nd = 2, sh[0] = C, sh[1] = f->cls_mean ? 2 * D : D;
                break;
            default: {
                expand(nm, sizeof nm, role, l, 0, "");
                const TSpec *t = model_find(&base, nm);
                if (t) nd = t->ndim, memcpy(sh, t->shape, sizeof sh);
            }
            }
            if (nd < 0) continue;
            for (int h = 0; h < (per_head ? H : 1); h++) {
                expand(nm, sizeof nm, pat, l, h, "");
                model_add(m, nm, dtype, nd, sh);
            }
        }
    }
}

/* --- the model's edits: zero and huge dims --------------------------------------------- */

/* a dim besides the zero one: the tensor's own (-1), or one of these */
static const int64_t dims[] = {-1,
                               1,
                               (int64_t)1 << 40,
                               (int64_t)1 << 53,
                               (int64_t)1 << 61,
                               (int64_t)1 << 62,
                               (int64_t)3 << 40,
                               INT64_MAX};

static int edit_hits(const Family *f, int role, int scope, const TSpec *first, const TSpec *t) {
    char nm[LD_NAME_BYTES];
    if (scope == 2) /* every tensor of the first's shape (a per-head query, key and value) */
        return t->ndim == first->ndim && !memcmp(t->shape, first->shape, sizeof t->shape);
    for (int l = 0; l < (scope ? 1 : L); l++)
        for (int h = 0; h < (scope ? 1 : H); h++) {
            expand(nm, sizeof nm, f->pat[role], l, h, "");
            if (!strcmp(nm, t->name)) return 1;
        }
    return 0;
}

/* the roles layout.c converts (a transposed projection, a linear patch embedding, per-head
 * or separate q/k/v, in_proj, a CLS token or position embedding without leading 1s) */
static const Slot converted[] = {S_IMG_PROJ_W, S_PATCH_W, S_Q_W, S_K_W, S_V_W,
                                 S_Q_B,        S_QKV_W,   S_CLS, S_POS};

/* 0 to 3 edits, each: a role (mostly one that is converted), its scope (every block and head; block
 * 0's; every tensor of its shape), a new shape (a zero dim where chosen, the last by default; the
 * others huge, 2^53 by default, or its own) or none (removed). */
static void edit_model(Model *m, const Family *f, Choices *c) {
    unsigned n = RARELY(2) ? 1 + PICK(3) : 0;
    for (unsigned e = 0; e < n; e++) {
        int role = RARELY(4) ? (int)PICK(N_SLOTS) : (int)converted[PICK(COUNT(converted))];
        int scope = (int)PICK(3), remove = PICK(8) == 7;
        char nm[LD_NAME_BYTES];
        expand(nm, sizeof nm, f->pat[role], 0, 0, "");
        const TSpec *first = f->pat[role][0] ? model_find(m, nm) : NULL;
        int nd = first ? first->ndim : 2;
        if (RARELY(8)) nd = 1 + (int)PICK(4);
        if (nd < 1) nd = 1;
        int z = nd - 1 - (int)PICK((unsigned)nd); /* by default the last: [2^53, 0] */
        int64_t sh[8] = {0};
        for (int d = 0; d < nd; d++) {
            int64_t v = d == z ? 0 : dims[(PICK(COUNT(dims)) + 3) % COUNT(dims)];
            sh[d] = v >= 0 ? v : first && d < first->ndim ? first->shape[d] : 1;
        }
        if (!first) continue;
        TSpec keep = *first;
        int k = 0;
        for (int i = 0; i < m->n; i++) {
            if (!edit_hits(f, role, scope, &keep, &m->t[i])) {
                m->t[k++] = m->t[i];
            } else if (!remove) {
                m->t[i].ndim = nd;
                memcpy(m->t[i].shape, sh, sizeof sh);
                m->t[k++] = m->t[i];
            }
        }
        m->n = k;
    }
}

static Model model; /* the input's */

/* --- the model as torch.save writes it ------------------------------------------------ */

/* A .safetensors file's dims stop at 2^53 (JSON numbers); a checkpoint's pickle holds any
 * int64, so the .pth form reaches what only larger dims do (3 * A of per-head lists). */

static void pkl_str(Out *o, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    uint8_t h[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    out_put(o, h, 5);
    out_str(o, s);
}

static void pkl_int(Out *o, int64_t v) { /* LONG1, 8 bytes */
    uint8_t b[10] = {0x8a, 8};
    for (int i = 0; i < 8; i++) b[2 + i] = (uint8_t)((uint64_t)v >> (8 * i));
    out_put(o, b, 10);
}

static void pkl_ordered_dict(Out *o) {
    out_str(o, "ccollections\nOrderedDict\n)R");
}

/* data.pkl of m's state dict: tensor i in storage "i", contiguous */
static void write_pickle(Out *o, const Model *m) {
    out_str(o, "\x80\x02");
    pkl_ordered_dict(o);
    out_str(o, "(");
    for (int i = 0; i < m->n; i++) {
        const TSpec *t = &m->t[i];
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        uint64_t numel = 1, stride[8];
        for (int d = t->ndim - 1; d >= 0; d--) stride[d] = numel, numel *= (uint64_t)t->shape[d];
        pkl_str(o, t->name);
        out_str(o, "ctorch._utils\n_rebuild_tensor_v2\n((");
        pkl_str(o, "storage");
        out_str(o, !strcmp(t->dtype, "F16")    ? "ctorch\nHalfStorage\n"
                   : !strcmp(t->dtype, "BF16") ? "ctorch\nBFloat16Storage\n"
                                               : "ctorch\nFloatStorage\n");
        pkl_str(o, key);
        pkl_str(o, "cpu");
        pkl_int(o, (int64_t)numel);
        out_str(o, "tQ");
        pkl_int(o, 0);
        for (int k = 0; k < 2; k++) {
            out_str(o, "(");
            for (int d = 0; d < t->ndim; d++) pkl_int(o, k ? (int64_t)stride[d] : t->shape[d]);
            out_str(o, "t");
        }
        out_str(o, "\x89");
        pkl_ordered_dict(o);
        out_str(o, "tR");
    }
    out_str(o, "u.");
}

/* Stored, as torch.save writes its entries (libzip's default, deflate, took a seventh of
 * each run: zlib's window set up per entry). */
static void add_entry(zip_t *za, const char *name, const void *b, size_t n) {
    zip_source_t *src = zip_source_buffer(za, b, n, 0);
    zip_int64_t i = src ? zip_file_add(za, name, src, ZIP_FL_OVERWRITE) : -1;
    if (i < 0 || zip_set_file_compression(za, (zip_uint64_t)i, ZIP_CM_STORE, 0) < 0) fail("libzip");
}

/* torch.save's zip of m, whose .safetensors bytes are st (the tensors' data); malloc'd */
static uint8_t *model_pth(const Model *m, uint8_t *st, size_t *n) {
    Out pkl = {.max = 1u << 20};
    write_pickle(&pkl, m);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_t *za = src ? zip_open_from_source(src, ZIP_TRUNCATE, &ze) : NULL;
    if (!za) fail("libzip");
    zip_source_keep(src);
    add_entry(za, "archive/data.pkl", pkl.p, pkl.n);
    add_entry(za, "archive/version", "3\n", 2);
    add_entry(za, "archive/byteorder", "little", 6);
    char names[T_MAX_TENSORS][32];
    for (int i = 0; i < m->n; i++) {
        snprintf(names[i], sizeof names[i], "archive/data/%d", i);
        const uint8_t *d = model_data(m, st, m->t[i].name);
        size_t k = !strcmp(m->t[i].dtype, "F32") ? 4 : 2;
        for (int x = 0; x < m->t[i].ndim; x++) k *= (size_t)m->t[i].shape[x];
        add_entry(za, names[i], d ? d : (const uint8_t *)"", k);
    }
    if (zip_close(za) != 0) fail("libzip");
    zip_stat_t zs;
    uint8_t *file = NULL;
    if (zip_source_stat(src, &zs) != 0 || zip_source_open(src) != 0 || !(file = malloc(zs.size)) ||
        zip_source_read(src, file, zs.size) != (zip_int64_t)zs.size)
        fail("libzip");
    zip_source_close(src);
    zip_source_free(src);
    zip_error_fini(&ze);
    free(pkl.p);
    *n = zs.size;
    return file;
}

/* The model file for family f: from choices (dtype, .safetensors or .pth, edits). */
static void make_model(const Family *f, Choices *c) {
    family_model(&model, f, dtypes[PICK(COUNT(dtypes))]);
    int pth = PICK(2);
    edit_model(&model, f, c);
    size_t n;
    uint8_t *b = model_bytes(&model, &n);
    if (!b) fail("cannot write the model");
    if (pth) {
        uint8_t *z = model_pth(&model, b, &n);
        free(b);
        b = z;
    }
    memfile_set(&model_file, b, n);
    free(b);
}

/* Once: the families, each family's model in each dtype checked to load, both through the
 * shipped layouts' detection and with its file as --layout (a fuzzer on models that fail
 * would test the refusals only). */
static void init(void) {
    if (vit_n_layouts > MAX_FAMILIES) fail("more shipped layouts than MAX_FAMILIES");
    memfile_init(&model_file, "model.safetensors");
    memfile_init(&layout_file, "layout.json");
    for (int i = 0; i < vit_n_layouts; i++) {
        family_init(&fams[n_fams], i);
        memfile_init(&shipped_file[i], "shipped.json");
        memfile_set(&shipped_file[i], (const uint8_t *)fams[i].text, strlen(fams[i].text));
        n_fams++;
    }
    int bad = 0; /* every family's failures listed, then stopped */
    for (int i = 0; i < n_fams; i++)
        for (unsigned k = 0; k < 2 * COUNT(dtypes); k++) {
            uint8_t ch[2] = {(uint8_t)(k % COUNT(dtypes)), (uint8_t)(k / COUNT(dtypes))};
            Choices c = {.p = ch, .n = 2};
            make_model(&fams[i], &c);
            for (int with = 0; with < 2; with++) {
                Vit vit;
                VitError err;
                VitLoadOptions opt = {.n_heads = H,
                                      .layout_path = with ? shipped_file[i].path : NULL};
                if (vit_load(&vit, model_file.path, &opt, &err)) {
                    fprintf(stderr, "fuzz_layout: family %s, %s%s, %s: %s\n", fams[i].file,
                            dtypes[k % COUNT(dtypes)], k < COUNT(dtypes) ? "" : " .pth",
                            with ? "--layout" : "detected", err.msg);
                    bad++;
                    continue;
                }
                vit_free(&vit);
            }
        }
    if (bad) abort();
}

/* --- the layout, from choices ----------------------------------------------------------- */

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

static void name_value(Out *o, Choices *c, const Family *f, int role, int depth);

/* The family's name for a role, else timm's. */
static const char *own(const Family *f, int role) {
    return f->pat[role][0] ? f->pat[role] : ld_role((Slot)role);
}

/* One tensor name (or not) for the role. */
static void name_value(Out *o, Choices *c, const Family *f, int role, int depth) {
    unsigned k = depth ? PICK(6) : PICK(8);
    char nm[LD_NAME_BYTES];
    switch (k) {
    case 0: /* its own name: the family's */ out_printf(o, "\"%s\"", own(f, role)); return;
    case 1: /* another tensor of the model, by its full name */
        if (model.n)
            out_printf(o, "\"%s\"", model.t[PICK(model.n)].name);
        else
            out_str(o, "\"\"");
        return;
    case 2: /* another role's name: one tensor for several roles */
        out_printf(o, "\"%s\"", own(f, (int)PICK(N_SLOTS)));
        return;
    case 3: { /* a role's name with {h} for {l}, or {h} added: per-head lists */
        const char *r = own(f, RARELY(2) ? role : (int)PICK(N_SLOTS)), *at = strstr(r, "{l}");
        if (at && !RARELY(4))
            snprintf(nm, sizeof nm, "%.*s{h}%s", (int)(at - r), r, at + 3);
        else
            snprintf(nm, sizeof nm, "%.140s.{h}", r);
        out_printf(o, "\"%s\"", nm);
        return;
    }
    case 4: /* with the prefix */ out_printf(o, "\"{p}%s\"", own(f, role)); return;
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
            name_value(o, c, f, role, depth + 1);
        }
        out_str(o, "]");
        return;
    }
    default: /* not a string */ out_str(o, non_strings[PICK(COUNT(non_strings))]); return;
    }
}

/* The layout: "name", "tensors" (every role the family names, as it names it, or none;
 * then some roles rewritten, a role twice, a role that is none), the switches (the
 * family's, or odd values). */
static void write_layout(Out *o, Choices *c, const Family *f) {
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
        if (mine < 0 && (!all || r == N_SLOTS || !f->pat[r][0])) continue;
        if (!first) out_str(o, ", ");
        first = 0;
        out_printf(o, "\"%s\": ", r < N_SLOTS ? ld_role((Slot)r) : "blocks.{l}.not_a_role");
        if (mine < 0)
            out_printf(o, "\"%s\"", f->pat[r]);
        else
            name_value(o, c, f, r < N_SLOTS ? r : 0, 0);
    }
    out_str(o, "}");
    for (size_t s = 0; s < N_SWITCHES; s++) {
        if (!RARELY(4)) { /* the family's own (prefix: none, the names hold it) */
            if (f->sw[s] && strcmp(switches[s].key, "prefix") != 0) {
                out_printf(o, ", \"%s\": ", switches[s].key);
                out_str(o, f->sw[s]);
            }
            continue;
        }
        unsigned n = 0;
        while (n < 8 && switches[s].values[n]) n++;
        out_printf(o, ", \"%s\": %s", switches[s].key, switches[s].values[PICK(n)]);
    }
    out_str(o, "}");
}

/* --- entry point ------------------------------------------------------------------ */

/* The family whose "detect" tensor a layout's text names (the longest: "cls_token" is in
 * most), else timm's (the first). */
static int family_of(const char *text) {
    int best = 0;
    size_t best_n = 0;
    for (int i = 0; i < n_fams; i++) {
        size_t n = strlen(fams[i].detect);
        char key[LD_NAME_BYTES + 2];
        snprintf(key, sizeof key, "\"%s\"", fams[i].detect);
        if (n > best_n && strstr(text, key)) best = i, best_n = n;
    }
    return best;
}

/* libFuzzer calls it once, before the inputs and their time limit (init takes seconds in
 * the fuzz build); fuzz_main does not, the first input does. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!n_fams) init();
    VitLoadOptions opt = {.n_heads = H};
    if (size && data[0] == '{') { /* the layout's text, then NUL and the model's choices */
        const uint8_t *nul = memchr(data, 0, size);
        size_t n = nul ? (size_t)(nul - data) : size;
        char *text = malloc(n + 1);
        if (!text) fail("out of memory");
        memcpy(text, data, n);
        text[n] = 0;
        Choices ch = {.p = data + n + (nul != NULL), .n = size - n - (nul != NULL)};
        make_model(&fams[family_of(text)], &ch);
        memfile_set(&layout_file, (const uint8_t *)text, n);
        free(text);
        opt.layout_path = layout_file.path;
    } else {
        Choices ch = {.p = data, .n = size}, *c = &ch;
        const Family *f = &fams[PICK(n_fams)];
        static const int heads[] = {H, 0, 1, 4, 8, 3};
        opt.n_heads = heads[RARELY(4) ? PICK(COUNT(heads)) : 0];
        make_model(f, c);
        unsigned how = PICK(4); /* written from choices, f's file, none, another's file */
        if (how == 0) {
            Out o = {.max = LAYOUT_OUT_MAX};
            write_layout(&o, c, f);
            fuzz_dump(o.p, o.n);
            memfile_set(&layout_file, o.p, o.n);
            free(o.p);
            opt.layout_path = layout_file.path;
        } else if (how == 1) {
            opt.layout_path = shipped_file[f - fams].path;
        } else if (how == 3) {
            opt.layout_path = shipped_file[PICK(n_fams)].path;
        }
    }
    fuzz_model_load(model_file.path, &opt);
    return 0;
}
