/* pth.c - PyTorch checkpoints (engine/load/): torch.save's zip format (PyTorch >= 1.6, also
 * Hugging Face's pytorch_model.bin) read into the same tensor table as a .safetensors file
 * (StFile, internal.h), without running any of it.
 *
 * The format (torch/serialization.py, _save): a zip whose entries sit under one folder,
 * <prefix>/data.pkl (the object, pickled with protocol 2) and <prefix>/data/<key> (one
 * storage each, raw little-endian elements), <prefix>/version, and from torch 2.x
 * <prefix>/byteorder. A tensor in data.pkl is
 *   torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 *                                   backward_hooks[, metadata])
 * where `storage` is a persistent id ('storage', torch.FloatStorage, key, location, numel),
 * an nn.Parameter is torch._utils._rebuild_parameter(tensor, requires_grad, hooks), and a
 * state dict is collections.OrderedDict() filled by SETITEMS (its _metadata set by BUILD).
 *
 * Python's pickle runs whatever a file names (GLOBAL os system, REDUCE: os.system(...)).
 * This is not Python's unpickler: it knows the opcodes torch.save writes and a closed list
 * of globals, and builds plain values (dicts, lists, tuples, numbers, strings, storages,
 * tensors; an argparse.Namespace of a training script's args as an opaque value whose
 * fields are dropped); any other global is refused when it is read, before anything could
 * use it, with a message naming the file and the global. Nothing in a checkpoint is ever
 * called.
 *
 * Every size comes from the file and is checked before use, and a hostile file is refused
 * in time linear in its size and memory bounded by it (issue 34):
 *   - data.pkl: at most PKL_MAX_BYTES, and a compressed one at most PTH_MAX_INFLATE_RATIO
 *     times its compressed size plus PKL_INFLATE_SLACK (torch.save stores it; ViT-L's deflates
 *     4x), checked before it is inflated.
 *   - what the unpickler keeps (values, 40 bytes each, made in blocks; strings, which are
 *     copies of the pickle's bytes; the item arrays of tuples, lists and dicts, whose items
 *     a memo'd value can repeat at 2 bytes each; tensors' shapes) is counted as it is made,
 *     malloc's overhead included: at most PKL_MEM_PER_BYTE bytes per byte of the file plus
 *     PKL_MEM_SLACK, and never PKL_MAX_MEM. ViT-L's state dict (31 KB of pickle) needs
 *     0.2 MB, a checkpoint with AdamW's state beside it (100 KB) 0.6 MB (6 bytes per byte);
 *     a 1 MB file gets at most 48 MB, any file 128 MiB. None, True and False are
 *     constants, not values made. The stack and the memo have limits of their own (8 MB
 *     each).
 *   - the search for the state dict under its wrappers visits each dict once (a dict may
 *     hold itself, or many keys one child); storages are found by key in a hash table.
 *   - each storage's entry must hold exactly the bytes the pickle says (torch.save writes
 *     numel * element size, no more: a longer entry is refused too), must not inflate to
 *     more than PTH_MAX_INFLATE_RATIO times its compressed size plus PTH_INFLATE_SLACK, nor
 *     all of them together to more than that of their summed compressed sizes (a zip bomb,
 *     or a file padded with other entries, is refused before anything is allocated); only
 *     the storages a tensor of the state dict uses are allocated and read.
 *   - every entry read (data.pkl, byteorder, the storages) is read whole and its CRC-32
 *     checked against the zip's directory (a damaged download); an encrypted entry is
 *     refused by name.
 *   - a global's module and name are taken whole: one that is empty, longer than 127
 *     bytes or holds a NUL byte is refused (C's strings would cut it to another name).
 * The storages are read into one buffer the StFile owns. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>
#include <zlib.h>

/* --- limits ------------------------------------------------------------------ */

/* data.pkl: ViT-L's state dict pickles to ~31 KB, a checkpoint with an optimizer's state
 * to ~100 KB (a few MB for bigger models). */
#define PKL_MAX_BYTES     (64u << 20)
#define PKL_INFLATE_SLACK (1u << 20)
/* The unpickler's memory (see the top): PKL_MEM_PER_BYTE per byte of the file, plus
 * PKL_MEM_SLACK, at most PKL_MAX_MEM. */
#define PKL_MEM_PER_BYTE 16u
#define PKL_MEM_SLACK    (32u << 20)
#define PKL_MAX_MEM      ((size_t)128 << 20)
#define ALLOC_OVERHEAD   16u        /* malloc's own bytes per block, counted too */
#define PKL_MAX_STACK    (1u << 20) /* stack entries */
/* memo index: torch.save numbers them 0, 1, ...; ViT-L's state dict uses ~2000 */
#define PKL_MAX_MEMO  (1u << 20)
#define PKL_MAX_DEPTH 64  /* nesting of wrappers walked to find the state dict */
#define PKL_MAX_NAME  128 /* a GLOBAL's module or name, NUL included */
/* Probes of the storages' hash table for one key: torch.save's keys ("0", "1", ...) and
 * any others need a few; keys made to collide are refused past this, so that looking up
 * 65536 storages stays linear. */
#define PKL_MAX_PROBES 256
/* Storages read: ViT-g/14 in F32 is 4.4 GB. */
#define PTH_MAX_STORAGE_BYTES (16ull << 30)
/* A compressed entry may inflate to at most this many times its compressed size, plus
 * PTH_INFLATE_SLACK (the storages: each, and all together): torch.save stores them
 * uncompressed (1x); float weights deflate by ~1.1x, a zero-filled head by ~1000x. More is
 * a zip bomb, refused before anything is allocated or inflated. */
#define PTH_MAX_INFLATE_RATIO 16
#define PTH_INFLATE_SLACK     (64u << 20)

/* --- values -------------------------------------------------------------------- */

typedef enum {
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_TUPLE,
    V_LIST,
    V_DICT,
    V_GLOBAL,
    V_STORAGE,
    V_TENSOR,
    V_OPAQUE, /* an argparse.Namespace: kept as nothing, its attributes dropped */
    V_MARK
} VKind;

/* The globals a state dict needs; anything else is refused at GLOBAL. */
typedef enum {
    G_ORDERED_DICT,
    G_REBUILD_TENSOR,
    G_REBUILD_PARAMETER,
    G_STORAGE_TYPE,
    G_NAMESPACE /* argparse.Namespace: a training script's args beside the weights */
} GKind;

/* A tensor's view of its storage (V_TENSOR): allocated for tensors only. */
typedef struct {
    int storage; /* index into Pkl.storages */
    int ndim;
    int64_t offset; /* storage offset, elements */
    int64_t shape[ST_MAX_DIMS], stride[ST_MAX_DIMS];
} Tensor;

/* A value: 40 bytes, made VALS_PER_BLOCK at a time (ValBlock). */
typedef struct Val Val;
struct Val {
    VKind kind;
    int aux; /* V_GLOBAL: GKind; V_STORAGE: index into Pkl.storages; V_DICT: 1 once
                find_state_dict has searched it */
    union {
        int64_t i; /* V_BOOL, V_INT; V_GLOBAL of a storage type: index into storage_types */
        double f;  /* V_FLOAT */
    };
    size_t n;   /* V_STR bytes; V_TUPLE / V_LIST / V_DICT items (a dict: 2n) */
    size_t cap; /* items allocated */
    union {
        char *s;     /* V_STR: n bytes, NUL-terminated (a NUL may sit inside) */
        Val **items; /* V_TUPLE, V_LIST: [n]; V_DICT: [2n] key, value */
        Tensor *t;   /* V_TENSOR */
    };
};

#define VALS_PER_BLOCK 1024
typedef struct ValBlock ValBlock;
struct ValBlock {
    ValBlock *next;
    size_t used;
    Val v[VALS_PER_BLOCK];
};

typedef struct {
    char key[64];
    int dtype, elem_bytes;
    const char *dtype_name;
    int64_t numel;
    int used;           /* a tensor of the state dict has elements in it: read */
    size_t at;          /* used: byte offset in the storage buffer */
    zip_uint64_t entry; /* used: its entry in the zip */
} Storage;

typedef struct {
    const char *fname; /* for messages */
    VitError *err;
    size_t file_bytes;   /* the checkpoint's, for the memory budget */
    size_t mem, mem_max; /* bytes the unpickler keeps (charge), and its budget */
    ValBlock *blocks;
    Val **stack;
    size_t sp, stack_cap;
    Val **memo;
    size_t memo_cap;
    Storage *storages;
    int n_storages, storages_cap;
    int *slots;        /* the storages by key: open addressing, index + 1 (0: empty) */
    size_t n_slots;    /* a power of 2, at least 2 * n_storages */
    Val mark;          /* what MARK pushes: one value for all */
    Val none, yes, no; /* None, True, False: constants, one value each (2 bytes of pickle
                          would otherwise make 40 bytes of Val) */
} Pkl;

static Pkl pkl_new(const char *fname, size_t file_bytes, VitError *err) {
    Pkl p = {.fname = fname,
             .err = err,
             .file_bytes = file_bytes,
             .mark = {.kind = V_MARK},
             .none = {.kind = V_NONE},
             .yes = {.kind = V_BOOL, .i = 1},
             .no = {.kind = V_BOOL, .i = 0}};
    size_t per = file_bytes > (PKL_MAX_MEM - PKL_MEM_SLACK) / PKL_MEM_PER_BYTE
                     ? PKL_MAX_MEM
                     : file_bytes * PKL_MEM_PER_BYTE + PKL_MEM_SLACK;
    p.mem_max = per < PKL_MAX_MEM ? per : PKL_MAX_MEM;
    return p;
}

/* Count `bytes` more that the unpickler keeps; 0 (err set) past its budget. */
static int charge(Pkl *p, size_t bytes) {
    if (bytes <= p->mem_max - p->mem) {
        p->mem += bytes;
        return 1;
    }
    vit_set_error(p->err, VIT_ERR_FORMAT,
                  "%s: data.pkl makes more values than a %zu-byte file may (over %zu MiB): "
                  "refused, a state dict needs far less",
                  p->fname, p->file_bytes, p->mem_max >> 20);
    return 0;
}

static void *nomem(Pkl *p) {
    vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory reading data.pkl", p->fname);
    return NULL;
}

/* malloc(n), counted (charge). */
static void *pkl_alloc(Pkl *p, size_t n) {
    if (!charge(p, n + ALLOC_OVERHEAD)) return NULL;
    void *m = malloc(n ? n : 1);
    return m ? m : nomem(p);
}

static Val *new_val(Pkl *p, VKind k) {
    ValBlock *b = p->blocks;
    if (!b || b->used == VALS_PER_BLOCK) {
        if (!(b = pkl_alloc(p, sizeof *b))) return NULL;
        b->next = p->blocks;
        b->used = 0;
        p->blocks = b;
    }
    Val *v = &b->v[b->used++];
    memset(v, 0, sizeof *v);
    v->kind = k;
    return v;
}

static void free_vals(Pkl *p) {
    for (ValBlock *b = p->blocks, *nx; b; b = nx) {
        nx = b->next;
        for (size_t j = 0; j < b->used; j++) {
            Val *v = &b->v[j];
            if (v->kind == V_STR)
                free(v->s);
            else if (v->kind == V_TENSOR)
                free(v->t);
            else if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT)
                free(v->items);
        }
        free(b);
    }
    p->blocks = NULL;
    free(p->stack);
    free(p->memo);
    free(p->storages);
    free(p->slots);
}

static int push_item(Pkl *p, Val *c, Val *x) {
    if (c->n >= c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 8;
        if (!charge(p, (nc - c->cap) * sizeof *c->items + ALLOC_OVERHEAD)) return 0;
        Val **ni = realloc(c->items, nc * sizeof *ni);
        if (!ni) return nomem(p) != NULL;
        c->items = ni, c->cap = nc;
    }
    c->items[c->n++] = x;
    return 1;
}

/* Is v the string lit, byte for byte (a NUL inside v is not an end)? */
static int str_is(const Val *v, const char *lit) {
    return v->kind == V_STR && v->n == strlen(lit) && !memcmp(v->s, lit, v->n);
}

/* --- the stack ------------------------------------------------------------------ */

static int push(Pkl *p, Val *v) {
    if (!v) return 0;
    if (p->sp >= p->stack_cap) {
        if (p->stack_cap >= PKL_MAX_STACK) {
            vit_set_error(p->err, VIT_ERR_FORMAT, "%s: data.pkl: stack deeper than %u", p->fname,
                          PKL_MAX_STACK);
            return 0;
        }
        size_t nc = p->stack_cap ? 2 * p->stack_cap : 64;
        Val **ns = realloc(p->stack, nc * sizeof *ns);
        if (!ns) {
            vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory reading data.pkl", p->fname);
            return 0;
        }
        p->stack = ns, p->stack_cap = nc;
    }
    p->stack[p->sp++] = v;
    return 1;
}

static Val *pop(Pkl *p, size_t at) {
    if (p->sp == 0 || p->stack[p->sp - 1]->kind == V_MARK) {
        vit_set_error(p->err, VIT_ERR_FORMAT, "%s: data.pkl: stack underflow at byte %zu", p->fname,
                      at);
        return NULL;
    }
    return p->stack[--p->sp];
}

/* Index of the topmost mark, or -1 (err set). */
static long find_mark(Pkl *p, size_t at) {
    for (size_t i = p->sp; i-- > 0;)
        if (p->stack[i]->kind == V_MARK) return (long)i;
    vit_set_error(p->err, VIT_ERR_FORMAT, "%s: data.pkl: no mark on the stack at byte %zu",
                  p->fname, at);
    return -1;
}

/* The items above the topmost mark into a new container of kind k (the mark popped). */
static Val *collect(Pkl *p, VKind k, size_t at) {
    long m = find_mark(p, at);
    if (m < 0) return NULL;
    Val *c = new_val(p, k);
    if (!c) return NULL;
    size_t n = p->sp - (size_t)m - 1;
    if (n) {
        if (!(c->items = pkl_alloc(p, n * sizeof *c->items))) return NULL;
        memcpy(c->items, p->stack + m + 1, n * sizeof *c->items);
    }
    c->n = c->cap = n;
    p->sp = (size_t)m;
    return c;
}

static int memo_put(Pkl *p, uint64_t idx, size_t at) {
    if (p->sp == 0 || idx >= PKL_MAX_MEMO) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      p->sp ? "%s: data.pkl: memo index %llu at byte %zu is over the limit"
                            : "%s: data.pkl: memo put of an empty stack (index %llu, byte %zu)",
                      p->fname, (unsigned long long)idx, at);
        return 0;
    }
    if (idx >= p->memo_cap) {
        size_t nc = p->memo_cap ? p->memo_cap : 64;
        while (nc <= idx) nc *= 2;
        Val **nm = realloc(p->memo, nc * sizeof *nm);
        if (!nm) {
            vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory reading data.pkl", p->fname);
            return 0;
        }
        memset(nm + p->memo_cap, 0, (nc - p->memo_cap) * sizeof *nm);
        p->memo = nm, p->memo_cap = nc;
    }
    p->memo[idx] = p->stack[p->sp - 1];
    return 1;
}

static Val *memo_get(Pkl *p, uint64_t idx, size_t at) {
    if (idx >= p->memo_cap || !p->memo[idx]) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: memo index %llu at byte %zu was never set", p->fname,
                      (unsigned long long)idx, at);
        return NULL;
    }
    return p->memo[idx];
}

/* --- globals ---------------------------------------------------------------------- */

static const struct {
    const char *name;
    int dtype, bytes;
    const char *dtype_name;
} storage_types[] = {
    {"FloatStorage", ST_F32, 4, "F32"},
    {"HalfStorage", ST_F16, 2, "F16"},
    {"BFloat16Storage", ST_BF16, 2, "BF16"},
    {"float32", ST_F32, 4, "F32"},
    {"float16", ST_F16, 2, "F16"},
    {"bfloat16", ST_BF16, 2, "BF16"},
    /* data, not code: read so that a state dict holding them (a BatchNorm's counter) opens;
       ld_tensor refuses them by dtype where a weight is expected */
    {"DoubleStorage", ST_OTHER, 8, "F64"},
    {"LongStorage", ST_OTHER, 8, "I64"},
    {"IntStorage", ST_OTHER, 4, "I32"},
    {"ShortStorage", ST_OTHER, 2, "I16"},
    {"CharStorage", ST_OTHER, 1, "I8"},
    {"ByteStorage", ST_OTHER, 1, "U8"},
    {"BoolStorage", ST_OTHER, 1, "BOOL"},
};

/* A GLOBAL's module or name [n bytes] (`part`), from GLOBAL or STACK_GLOBAL (`op`): taken
 * whole or refused, never cut to fit a buffer or at a NUL byte, where C's string functions
 * would end it ("collections\0os" would compare as "collections"). 0: refused, err set. */
static int global_part_ok(Pkl *p, const char *op, const char *part, const char *s, size_t n,
                          size_t at) {
    const char *bad = n == 0                 ? "is empty"
                      : n >= PKL_MAX_NAME    ? "is longer than 127 bytes"
                      : memchr(s, 0, n) != 0 ? "holds a NUL byte"
                                             : NULL;
    if (bad)
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: %s at byte %zu: the global's %s %s: refused", p->fname, op, at,
                      part, bad);
    return !bad;
}

/* GLOBAL module name: one of the allowed globals, else refused with a message. */
static Val *make_global(Pkl *p, const char *mod, const char *name) {
    Val *g = NULL;
    if (!strcmp(mod, "collections") && !strcmp(name, "OrderedDict")) {
        if ((g = new_val(p, V_GLOBAL))) g->aux = G_ORDERED_DICT;
        return g;
    }
    if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2")) {
        if ((g = new_val(p, V_GLOBAL))) g->aux = G_REBUILD_TENSOR;
        return g;
    }
    if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_parameter")) {
        if ((g = new_val(p, V_GLOBAL))) g->aux = G_REBUILD_PARAMETER;
        return g;
    }
    if (!strcmp(mod, "torch"))
        for (size_t i = 0; i < sizeof storage_types / sizeof *storage_types; i++)
            if (!strcmp(name, storage_types[i].name)) {
                if ((g = new_val(p, V_GLOBAL))) {
                    g->aux = G_STORAGE_TYPE;
                    g->i = (int64_t)i;
                }
                return g;
            }
    if (!strcmp(mod, "argparse") && !strcmp(name, "Namespace")) {
        /* timm's train.py and DINO save their args beside the weights: plain data, made
         * here into an opaque value (nothing is constructed, its fields are not read) */
        if ((g = new_val(p, V_GLOBAL))) g->aux = G_NAMESPACE;
        return g;
    }
    if (!strcmp(mod, "torch") && strstr(name, "Storage")) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: storage type 'torch.%.60s' is not one vitlens reads (F32, "
                      "F16, BF16; integers and F64 for tensors it does not use)",
                      p->fname, name);
        return NULL;
    }
    /* A class of the user's own or of torch.nn: torch.save(model) pickled the module. */
    if (!strcmp(mod, "__main__") || !strncmp(mod, "torch.nn", 8) ||
        !strncmp(mod, "torchvision", 11) || !strncmp(mod, "timm", 4) ||
        !strncmp(mod, "transformers", 12))
        vit_set_error(
            p->err, VIT_ERR_FORMAT,
            "%s: data.pkl names '%.80s.%.80s': a whole pickled model (torch.save(model)), "
            "which needs its Python code to load and which vitlens does not run. In "
            "Python: torch.save(model.state_dict(), \"%s\")",
            p->fname, mod, name, p->fname);
    else
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl names the global '%.80s.%.80s', which a state dict never "
                      "holds: refused, nothing was run (vitlens reads tensors only; save "
                      "torch.save(model.state_dict(), path))",
                      p->fname, mod, name);
    return NULL;
}

/* --- REDUCE, BUILD, BINPERSID ----------------------------------------------------- */

static int as_int(const Val *v, int64_t *out) {
    if (!v || (v->kind != V_INT && v->kind != V_BOOL)) return 0;
    *out = v->i;
    return 1;
}

/* --- the storages, by key --------------------------------------------------------- */

/* FNV-1a, then mixed so that the table's low bits depend on every byte. */
static uint32_t key_hash(const char *k) {
    uint32_t h = 2166136261u;
    for (; *k; k++) h = (h ^ (uint8_t)*k) * 16777619u;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    return h;
}

/* The storage keyed `key`: its index, or -1 with *slot the empty slot where it would go;
 * -2 (err set) when PKL_MAX_PROBES slots are taken by other keys (keys made to collide). */
static int storage_find(Pkl *p, const char *key, size_t *slot) {
    size_t mask = p->n_slots - 1, h = key_hash(key) & mask;
    for (int probe = 0; probe < PKL_MAX_PROBES; probe++, h = (h + 1) & mask) {
        int s = p->slots[h] - 1;
        if (s < 0 || !strcmp(p->storages[s].key, key)) {
            *slot = h;
            return s;
        }
    }
    vit_set_error(p->err, VIT_ERR_FORMAT,
                  "%s: data.pkl: storage key '%s' collides with %d others in the table of "
                  "storages (keys made to collide?): refused",
                  p->fname, key, PKL_MAX_PROBES);
    return -2;
}

/* Room in the table for one more storage: at most half its slots taken. */
static int slots_reserve(Pkl *p) {
    if (2 * ((size_t)p->n_storages + 1) <= p->n_slots) return 1;
    size_t ns = p->n_slots ? 2 * p->n_slots : 128, h;
    int *sl = calloc(ns, sizeof *sl);
    if (!sl) return nomem(p) != NULL;
    free(p->slots);
    p->slots = sl, p->n_slots = ns;
    for (int s = 0; s < p->n_storages; s++) {
        if (storage_find(p, p->storages[s].key, &h) != -1) return 0;
        p->slots[h] = s + 1;
    }
    return 1;
}

/* persistent id ('storage', storage_type, key, location, numel) -> a storage. */
static Val *persistent_load(Pkl *p, const Val *pid, size_t at) {
    if (pid->kind != V_TUPLE || pid->n != 5 || !str_is(pid->items[0], "storage") ||
        pid->items[1]->kind != V_GLOBAL || pid->items[1]->aux != G_STORAGE_TYPE ||
        pid->items[2]->kind != V_STR || pid->items[3]->kind != V_STR ||
        pid->items[4]->kind != V_INT) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: persistent id at byte %zu is not ('storage', type, key, "
                      "location, numel)",
                      p->fname, at);
        return NULL;
    }
    const int ty = (int)pid->items[1]->i; /* index into storage_types */
    const char *key = pid->items[2]->s;
    int64_t numel = pid->items[4]->i;
    if (numel < 0 || pid->items[2]->n == 0 || pid->items[2]->n >= sizeof p->storages[0].key ||
        strchr(key, '/') || strlen(key) != pid->items[2]->n) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: storage '%.40s' at byte %zu: bad key or %lld elements",
                      p->fname, key, at, (long long)numel);
        return NULL;
    }
    size_t slot;
    int s = slots_reserve(p) ? storage_find(p, key, &slot) : -2;
    if (s == -2) return NULL;
    if (s >= 0) {
        const Storage *o = &p->storages[s];
        if (strcmp(o->dtype_name, storage_types[ty].dtype_name) != 0 || o->numel != numel) {
            vit_set_error(p->err, VIT_ERR_FORMAT,
                          "%s: data.pkl: storage '%s' is declared twice, as %s x %lld and %s x "
                          "%lld",
                          p->fname, key, o->dtype_name, (long long)o->numel,
                          storage_types[ty].dtype_name, (long long)numel);
            return NULL;
        }
    } else {
        if (p->n_storages >= VIT_MAX_TENSORS) {
            vit_set_error(p->err, VIT_ERR_FORMAT, "%s: more than %d storages", p->fname,
                          VIT_MAX_TENSORS);
            return NULL;
        }
        if (p->n_storages == p->storages_cap) {
            int nc = p->storages_cap ? 2 * p->storages_cap : 64;
            Storage *ns = realloc(p->storages, (size_t)nc * sizeof *ns);
            if (!ns) return nomem(p);
            p->storages = ns, p->storages_cap = nc;
        }
        s = p->n_storages++;
        p->slots[slot] = s + 1;
        Storage *st = &p->storages[s];
        memset(st, 0, sizeof *st);
        snprintf(st->key, sizeof st->key, "%s", key);
        st->dtype = storage_types[ty].dtype, st->elem_bytes = storage_types[ty].bytes;
        st->dtype_name = storage_types[ty].dtype_name;
        st->numel = numel;
    }
    Val *v = new_val(p, V_STORAGE);
    if (v) v->aux = s;
    return v;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static Val *rebuild_tensor(Pkl *p, const Val *args, size_t at) {
    if (args->kind != V_TUPLE || args->n < 4 || args->items[0]->kind != V_STORAGE ||
        args->items[2]->kind != V_TUPLE || args->items[3]->kind != V_TUPLE) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: _rebuild_tensor_v2 at byte %zu without (storage, offset, "
                      "size, stride)",
                      p->fname, at);
        return NULL;
    }
    const Val *sz = args->items[2], *sd = args->items[3];
    Val *v = new_val(p, V_TENSOR);
    if (!v || !(v->t = pkl_alloc(p, sizeof *v->t))) return NULL;
    Tensor *t = v->t;
    memset(t, 0, sizeof *t);
    t->storage = args->items[0]->aux;
    if (!as_int(args->items[1], &t->offset) || t->offset < 0 || sz->n != sd->n ||
        sz->n > ST_MAX_DIMS) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: tensor at byte %zu: bad offset, or size and stride of "
                      "different or more than %d dims",
                      p->fname, at, ST_MAX_DIMS);
        return NULL;
    }
    t->ndim = (int)sz->n;
    for (int d = 0; d < t->ndim; d++)
        if (!as_int(sz->items[d], &t->shape[d]) || !as_int(sd->items[d], &t->stride[d]) ||
            t->shape[d] < 0 || t->stride[d] < 0) {
            vit_set_error(p->err, VIT_ERR_FORMAT,
                          "%s: data.pkl: tensor at byte %zu: size or stride %d is not a "
                          "non-negative integer",
                          p->fname, at, d);
            return NULL;
        }
    return v;
}

/* dict[k] = v, a dict's items kept as pairs (n pairs, 2n items). */
static int dict_set(Pkl *p, Val *d, Val *k, Val *v) {
    size_t n = d->n;
    d->n = 2 * n;
    int ok = push_item(p, d, k) && push_item(p, d, v);
    d->n = ok ? n + 1 : n;
    return ok;
}

static Val *reduce(Pkl *p, const Val *fn, const Val *args, size_t at) {
    if (fn->kind != V_GLOBAL || args->kind != V_TUPLE) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: REDUCE at byte %zu of something that is not an allowed "
                      "global: refused",
                      p->fname, at);
        return NULL;
    }
    switch ((GKind)fn->aux) {
    case G_ORDERED_DICT: { /* OrderedDict() or OrderedDict([(k, v), ...]) */
        Val *d = new_val(p, V_DICT);
        if (!d) return NULL;
        const Val *l = args->n == 1 ? args->items[0] : NULL;
        int ok = args->n == 0 || (l && (l->kind == V_LIST || l->kind == V_TUPLE));
        for (size_t i = 0; ok && l && i < l->n; i++) {
            const Val *kv = l->items[i];
            ok = kv->kind == V_TUPLE && kv->n == 2;
            if (ok && !dict_set(p, d, kv->items[0], kv->items[1])) return NULL;
        }
        if (ok) return d;
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: OrderedDict at byte %zu with arguments that are not a list "
                      "of pairs",
                      p->fname, at);
        return NULL;
    }
    case G_REBUILD_TENSOR: return rebuild_tensor(p, args, at);
    case G_REBUILD_PARAMETER:
        if (args->n >= 1 && args->items[0]->kind == V_TENSOR) return args->items[0];
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: _rebuild_parameter at byte %zu of something not a tensor",
                      p->fname, at);
        return NULL;
    case G_NAMESPACE: return new_val(p, V_OPAQUE); /* Namespace(**kw): its fields dropped */
    case G_STORAGE_TYPE: break;
    }
    vit_set_error(p->err, VIT_ERR_FORMAT,
                  "%s: data.pkl: REDUCE at byte %zu calls a storage type: refused", p->fname, at);
    return NULL;
}

/* --- the unpickler ------------------------------------------------------------------ */

static uint64_t le(const uint8_t *b, int n) {
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--) x = (x << 8) | b[i];
    return x;
}

/* Run the pickle [buf, buf + n); the object it returns into *out. */
static VitStatus unpickle(Pkl *p, const uint8_t *buf, size_t n, Val **out) {
    size_t i = 0;
#define NEED(k)                                                                                    \
    do {                                                                                           \
        if (n - i < (size_t)(k)) {                                                                 \
            return vit_set_error(p->err, VIT_ERR_FORMAT,                                           \
                                 "%s: data.pkl is cut short at byte %zu (opcode 0x%02x)",          \
                                 p->fname, at, op);                                                \
        }                                                                                          \
    } while (0)
#define FAIL() return p->err->code
    while (i < n) {
        size_t at = i;
        uint8_t op = buf[i++];
        Val *v = NULL, *a, *b;
        long m;
        switch (op) {
        case 0x80:
            NEED(1);
            i++;
            break; /* PROTO */
        case '.':  /* STOP */
            if (p->sp != 1 || p->stack[0]->kind == V_MARK)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl ends with %zu values on the stack, expected 1",
                                     p->fname, p->sp);
            *out = p->stack[0];
            return VIT_OK;
        case '(':
            if (!push(p, &p->mark)) FAIL();
            break;
        case '}':
            if (!push(p, new_val(p, V_DICT))) FAIL();
            break;
        case ']':
            if (!push(p, new_val(p, V_LIST))) FAIL();
            break;
        case ')':
            if (!push(p, new_val(p, V_TUPLE))) FAIL();
            break;
        case 'N':
            if (!push(p, &p->none)) FAIL();
            break;
        case 0x88:
        case 0x89: /* NEWTRUE, NEWFALSE */
            if (!push(p, op == 0x88 ? &p->yes : &p->no)) FAIL();
            break;
        case 't':
        case 'l': /* TUPLE, LIST */
            if (!push(p, collect(p, op == 't' ? V_TUPLE : V_LIST, at))) FAIL();
            break;
        case 'd': { /* DICT: k0 v0 k1 v1 ... above the mark */
            Val *c = collect(p, V_DICT, at);
            if (!c) FAIL();
            if (c->n % 2)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: odd number of items for a dict at byte %zu",
                                     p->fname, at);
            c->n /= 2;
            if (!push(p, c)) FAIL();
            break;
        }
        case 0x85:
        case 0x86:
        case 0x87: { /* TUPLE1..3 */
            int k = op - 0x84;
            Val *c = new_val(p, V_TUPLE);
            if (!c) FAIL();
            Val *it[3];
            for (int j = k - 1; j >= 0; j--)
                if (!(it[j] = pop(p, at))) FAIL();
            for (int j = 0; j < k; j++)
                if (!push_item(p, c, it[j])) FAIL();
            if (!push(p, c)) FAIL();
            break;
        }
        case 's': /* SETITEM */
            if (!(b = pop(p, at)) || !(a = pop(p, at)) || !(v = pop(p, at))) FAIL();
            if (v->kind != V_DICT)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: SETITEM on a non-dict at byte %zu", p->fname,
                                     at);
            if (!dict_set(p, v, a, b) || !push(p, v)) FAIL();
            break;
        case 'u':
        case 'e': { /* SETITEMS, APPENDS */
            if ((m = find_mark(p, at)) < 1) {
                if (m == 0)
                    vit_set_error(p->err, VIT_ERR_FORMAT,
                                  "%s: data.pkl: nothing under the mark at byte %zu", p->fname, at);
                FAIL();
            }
            Val *c = p->stack[m - 1];
            size_t k = p->sp - (size_t)m - 1;
            if (op == 'u' ? (c->kind != V_DICT || k % 2) : c->kind != V_LIST)
                return vit_set_error(p->err, VIT_ERR_FORMAT, "%s: data.pkl: %s at byte %zu on a %s",
                                     p->fname, op == 'u' ? "SETITEMS" : "APPENDS", at,
                                     op == 'u' ? "non-dict or odd count" : "non-list");
            for (size_t j = 0; j < k; j += op == 'u' ? 2 : 1)
                if (op == 'u' ? !dict_set(p, c, p->stack[m + 1 + j], p->stack[m + 2 + j])
                              : !push_item(p, c, p->stack[m + 1 + j]))
                    FAIL();
            p->sp = (size_t)m;
            break;
        }
        case 'a': /* APPEND */
            if (!(a = pop(p, at)) || !(v = pop(p, at))) FAIL();
            if (v->kind != V_LIST)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: APPEND on a non-list at byte %zu", p->fname,
                                     at);
            if (!push_item(p, v, a) || !push(p, v)) FAIL();
            break;
        case 'q':
            NEED(1);
            if (!memo_put(p, buf[i], at)) FAIL();
            i += 1;
            break;
        case 'r':
            NEED(4);
            if (!memo_put(p, le(buf + i, 4), at)) FAIL();
            i += 4;
            break;
        case 'h':
            NEED(1);
            if (!push(p, memo_get(p, buf[i], at))) FAIL();
            i += 1;
            break;
        case 'j':
            NEED(4);
            if (!push(p, memo_get(p, le(buf + i, 4), at))) FAIL();
            i += 4;
            break;
        case 'J':
        case 'K':
        case 'M': { /* BININT (signed 4), BININT1, BININT2 */
            int k = op == 'J' ? 4 : op == 'K' ? 1 : 2;
            NEED(k);
            if (!(v = new_val(p, V_INT))) FAIL();
            v->i = op == 'J' ? (int64_t)(int32_t)(uint32_t)le(buf + i, 4) : (int64_t)le(buf + i, k);
            i += (size_t)k;
            if (!push(p, v)) FAIL();
            break;
        }
        case 0x8a: { /* LONG1: n bytes, two's complement little-endian */
            NEED(1);
            int k = buf[i++];
            NEED(k);
            if (k > 8)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: integer of %d bytes at byte %zu", p->fname, k,
                                     at);
            uint64_t x = k ? le(buf + i, k) : 0;
            if (k && k < 8 && (buf[i + k - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * k);
            i += (size_t)k;
            if (!(v = new_val(p, V_INT))) FAIL();
            memcpy(&v->i, &x, sizeof x);
            if (!push(p, v)) FAIL();
            break;
        }
        case 'G': { /* BINFLOAT: big-endian double */
            NEED(8);
            uint64_t x = 0;
            for (int j = 0; j < 8; j++) x = (x << 8) | buf[i + j];
            i += 8;
            if (!(v = new_val(p, V_FLOAT))) FAIL();
            memcpy(&v->f, &x, sizeof x);
            if (!push(p, v)) FAIL();
            break;
        }
        case 'X':
        case 0x8c:
        case 'T':
        case 'U':
        case 'B':
        case 'C': { /* strings, bytes */
            int k = (op == 'X' || op == 'T' || op == 'B') ? 4 : 1;
            NEED(k);
            uint64_t len = le(buf + i, k);
            i += (size_t)k;
            NEED(len);
            if (!(v = new_val(p, V_STR)) || !(v->s = pkl_alloc(p, (size_t)len + 1))) FAIL();
            memcpy(v->s, buf + i, (size_t)len);
            v->s[len] = 0;
            v->n = (size_t)len;
            i += (size_t)len;
            if (!push(p, v)) FAIL();
            break;
        }
        case 'c': { /* GLOBAL "module\nname\n" */
            const uint8_t *nl1 = memchr(buf + i, '\n', n - i);
            const uint8_t *nl2 = nl1 ? memchr(nl1 + 1, '\n', n - (size_t)(nl1 + 1 - buf)) : NULL;
            if (!nl2)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: GLOBAL at byte %zu is cut short", p->fname, at);
            char mod[PKL_MAX_NAME], name[PKL_MAX_NAME];
            size_t mod_n = (size_t)(nl1 - (buf + i)), name_n = (size_t)(nl2 - nl1 - 1);
            if (!global_part_ok(p, "GLOBAL", "module", (const char *)buf + i, mod_n, at) ||
                !global_part_ok(p, "GLOBAL", "name", (const char *)nl1 + 1, name_n, at))
                FAIL();
            memcpy(mod, buf + i, mod_n);
            mod[mod_n] = 0;
            memcpy(name, nl1 + 1, name_n);
            name[name_n] = 0;
            i = (size_t)(nl2 + 1 - buf);
            if (!push(p, make_global(p, mod, name))) FAIL();
            break;
        }
        case 0x93: /* STACK_GLOBAL: module, name strings on the stack */
            if (!(b = pop(p, at)) || !(a = pop(p, at))) FAIL();
            if (a->kind != V_STR || b->kind != V_STR)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: STACK_GLOBAL at byte %zu without two strings",
                                     p->fname, at);
            if (!global_part_ok(p, "STACK_GLOBAL", "module", a->s, a->n, at) ||
                !global_part_ok(p, "STACK_GLOBAL", "name", b->s, b->n, at) ||
                !push(p, make_global(p, a->s, b->s)))
                FAIL();
            break;
        case 'Q': /* BINPERSID */
            if (!(a = pop(p, at)) || !push(p, persistent_load(p, a, at))) FAIL();
            break;
        case 'R': /* REDUCE */
            if (!(b = pop(p, at)) || !(a = pop(p, at)) || !push(p, reduce(p, a, b, at))) FAIL();
            break;
        case 0x81: /* NEWOBJ cls args: only an argparse.Namespace (protocol 2's object()) */
            if (!(b = pop(p, at)) || !(a = pop(p, at))) FAIL();
            if (a->kind != V_GLOBAL || a->aux != G_NAMESPACE || b->kind != V_TUPLE)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: NEWOBJ at byte %zu of something that is not "
                                     "an argparse.Namespace: refused",
                                     p->fname, at);
            if (!push(p, new_val(p, V_OPAQUE))) FAIL();
            break;
        case 'b': /* BUILD: an OrderedDict's _metadata, a tensor's __dict__, a Namespace's
                     fields: not needed */
            if (!(b = pop(p, at))) FAIL();
            if (p->sp == 0 ||
                (p->stack[p->sp - 1]->kind != V_DICT && p->stack[p->sp - 1]->kind != V_TENSOR &&
                 p->stack[p->sp - 1]->kind != V_OPAQUE))
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl: BUILD at byte %zu on something that is not a "
                                     "dict or tensor",
                                     p->fname, at);
            break;
        case '0':
            if (!pop(p, at)) FAIL();
            break; /* POP */
        case '1':  /* POP_MARK */
            if ((m = find_mark(p, at)) < 0) FAIL();
            p->sp = (size_t)m;
            break;
        case '2': /* DUP */
            if (p->sp == 0 || !push(p, p->stack[p->sp - 1]))
                return p->sp ? p->err->code
                             : vit_set_error(p->err, VIT_ERR_FORMAT,
                                             "%s: data.pkl: DUP of an empty stack", p->fname);
            break;
        default:
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: opcode 0x%02x at byte %zu is not one torch.save "
                                 "writes for a state dict: refused",
                                 p->fname, op, at);
        }
    }
    return vit_set_error(p->err, VIT_ERR_FORMAT, "%s: data.pkl ends without STOP", p->fname);
#undef NEED
#undef FAIL
}

/* --- the state dict ------------------------------------------------------------------- */

static int dict_has_tensor(const Val *d) {
    for (size_t i = 0; i < d->n; i++)
        if (d->items[2 * i]->kind == V_STR && d->items[2 * i + 1]->kind == V_TENSOR) return 1;
    return 0;
}

static Val *dict_get(const Val *d, const char *key) {
    for (size_t i = 0; i < d->n; i++)
        if (str_is(d->items[2 * i], key)) return d->items[2 * i + 1];
    return NULL;
}

/* The dict of tensors: the object itself, or under a wrapper's key (timm/DeiT "model",
 * Lightning "state_dict", DINO "teacher", ...), depth-first. *how: the wrapper key. Each
 * dict is searched once (marked): one met again, shared by two keys or holding itself
 * through the memo, has nothing new, so the search is linear in the items. */
static const Val *find_state_dict(Val *v, const char **how, int depth) {
    static const char *const keys[] = {"state_dict", "model_state_dict", "model", "teacher",
                                       "student",    "module",           "net",   "model_ema"};
    if (v->kind != V_DICT || v->aux || depth > PKL_MAX_DEPTH) return NULL;
    v->aux = 1;
    if (dict_has_tensor(v)) return v;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        Val *c = dict_get(v, keys[k]);
        const Val *r = c ? find_state_dict(c, how, depth + 1) : NULL;
        if (r) {
            if (!*how) *how = keys[k];
            return r;
        }
    }
    return NULL;
}

/* Which storages the tensors of sd use (an element or more), and where each goes in the
 * storage buffer (64-byte aligned) whose size is *total: the storages no tensor uses are
 * neither allocated nor read. */
static VitStatus layout_storages(Pkl *p, const Val *sd, size_t *total) {
    for (size_t i = 0; i < sd->n; i++) {
        const Val *k = sd->items[2 * i], *v = sd->items[2 * i + 1];
        if (k->kind != V_STR || v->kind != V_TENSOR) continue;
        int empty = 0;
        for (int d = 0; d < v->t->ndim; d++) empty |= v->t->shape[d] == 0;
        if (!empty) p->storages[v->t->storage].used = 1;
    }
    *total = 0;
    for (int s = 0; s < p->n_storages; s++) {
        Storage *sg = &p->storages[s];
        if (!sg->used) continue;
        sg->at = *total;
        uint64_t bytes = (uint64_t)sg->numel * (uint64_t)sg->elem_bytes;
        if ((uint64_t)sg->numel > PTH_MAX_STORAGE_BYTES || bytes > PTH_MAX_STORAGE_BYTES - *total)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: the storages hold more than %llu GiB (storage '%s': %lld x "
                                 "%d bytes)",
                                 p->fname, PTH_MAX_STORAGE_BYTES >> 30, sg->key,
                                 (long long)sg->numel, sg->elem_bytes);
        *total += ((size_t)bytes + 63) & ~(size_t)63;
    }
    return VIT_OK;
}

/* A prefix every tensor name carries (DataParallel's "module.", torch.compile's
 * "_orig_mod."), or DINO's "backbone." that the backbone's names carry (its projection head
 * "head.*" is not the ViT's: dropped, *drop_others 1). NULL: none. */
static const char *common_prefix(const StFile *st, int *drop_others) {
    static const char *const pre[] = {"module.", "_orig_mod.", "backbone."};
    *drop_others = 0;
    for (size_t k = 0; k < sizeof pre / sizeof *pre; k++) {
        size_t n = strlen(pre[k]);
        int with = 0;
        for (int i = 0; i < st->n; i++) with += !strncmp(st->tensors[i].name, pre[k], n);
        if (with && (with == st->n || k == 2)) {
            *drop_others = with < st->n;
            return pre[k];
        }
    }
    return NULL;
}

/* Strip the wrappers' prefixes, repeatedly ("module._orig_mod."). */
static void strip_prefixes(StFile *st) {
    const char *pre;
    int drop;
    for (int round = 0; round < 4 && (pre = common_prefix(st, &drop)); round++) {
        size_t skip = strlen(pre);
        int w = 0;
        for (int i = 0; i < st->n; i++) {
            StTensor *t = &st->tensors[i];
            if (strncmp(t->name, pre, skip) != 0) { /* drop: not the backbone's */
                free(t->name);
                continue;
            }
            memmove(t->name, t->name + skip, strlen(t->name + skip) + 1);
            st->tensors[w++] = *t;
        }
        st->n = w;
    }
}

/* Contiguous row-major (a dim of size 1 may have any stride, as torch allows). */
static int contiguous(const Tensor *t) {
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != want) return 0;
        want *= t->shape[d];
    }
    return 1;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No name twice (a pickle can repeat a dict key; Python keeps the last, vitlens refuses):
 * sorted, O(n log n), for a pickle of 65536 names. */
static VitStatus no_duplicates(Pkl *p, const StFile *st) {
    const char **names = malloc((size_t)(st->n ? st->n : 1) * sizeof *names);
    if (!names) return vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory", p->fname);
    for (int i = 0; i < st->n; i++) names[i] = st->tensors[i].name;
    qsort(names, (size_t)st->n, sizeof *names, cmp_names);
    VitStatus rc = VIT_OK;
    for (int i = 1; i < st->n && !rc; i++)
        if (!strcmp(names[i - 1], names[i]))
            rc = vit_set_error(p->err, VIT_ERR_FORMAT,
                               "%s: tensor '%s' appears twice in the state dict", p->fname,
                               names[i]);
    free(names);
    return rc;
}

/* The tensors of dict sd into st (names, dtype, shape; data set once the storages are
 * read), each checked against its storage (laid out by layout_storages). */
static VitStatus table_from_dict(Pkl *p, StFile *st, const Val *sd) {
    char sbuf[160];
    if (sd->n > VIT_MAX_TENSORS)
        return vit_set_error(p->err, VIT_ERR_FORMAT, "%s: %zu tensors exceeds the limit %d",
                             p->fname, sd->n, VIT_MAX_TENSORS);
    st->tensors = calloc(sd->n ? sd->n : 1, sizeof *st->tensors);
    if (!st->tensors) return vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory", p->fname);
    for (size_t i = 0; i < sd->n; i++) {
        const Val *k = sd->items[2 * i], *v = sd->items[2 * i + 1];
        if (k->kind != V_STR || v->kind != V_TENSOR) continue; /* not a tensor: not read */
        if (strlen(k->s) != k->n)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: the name of tensor '%s' holds a NUL byte", p->fname, k->s);
        const Tensor *t = v->t;
        const Storage *s = &p->storages[t->storage];
        StTensor *o = &st->tensors[st->n];
        if (!(o->name = strdup(k->s)))
            return vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory", p->fname);
        st->n++;
        o->dtype = s->dtype, o->elem_bytes = s->elem_bytes;
        snprintf(o->dtype_name, sizeof o->dtype_name, "%s", s->dtype_name);
        o->ndim = t->ndim;
        size_t numel = 1;
        int over = 0;
        for (int d = 0; d < t->ndim; d++) {
            o->shape[d] = t->shape[d];
            if (t->shape[d] && numel > (size_t)INT64_MAX / (size_t)t->shape[d])
                over = 1;
            else
                numel *= (size_t)t->shape[d];
        }
        if (over || numel > (size_t)(INT64_MAX / 8))
            return vit_set_error(p->err, VIT_ERR_FORMAT, "%s: tensor '%s': shape %s overflows",
                                 p->fname, o->name,
                                 st_shape_str(sbuf, sizeof sbuf, o->shape, o->ndim));
        o->n_elems = numel;
        if (numel && !contiguous(t))
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: tensor '%s' (shape %s) is not contiguous: save "
                                 "{k: v.contiguous() for k, v in model.state_dict().items()}",
                                 p->fname, o->name,
                                 st_shape_str(sbuf, sizeof sbuf, o->shape, o->ndim));
        if ((int64_t)numel > s->numel || t->offset > s->numel - (int64_t)numel)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: tensor '%s': elements [%lld, %lld) lie past the end of its "
                                 "storage '%s' (%lld elements)",
                                 p->fname, o->name, (long long)t->offset,
                                 (long long)(t->offset + (int64_t)numel), s->key,
                                 (long long)s->numel);
        if (!numel) continue; /* no bytes: begin = end = 0 */
        /* begin: the byte offset in the storage buffer, set when it is read */
        o->begin = s->at + (size_t)t->offset * (size_t)s->elem_bytes;
        o->end = o->begin + numel * (size_t)s->elem_bytes;
    }
    return no_duplicates(p, st);
}

/* --- the zip ------------------------------------------------------------------------- */

static VitStatus zip_error(VitError *err, const char *fname, const char *what, zip_error_t *ze) {
    return vit_set_error(err, VIT_ERR_FORMAT, "%s: %s: %s (a truncated or damaged zip?)", fname,
                         what, zip_error_strerror(ze));
}

/* Entry `name`: its index and stat (sizes, CRC-32), or an error naming it: missing, or
 * encrypted (torch.save never encrypts; libzip would need a password, and without one a
 * read fails as if the entry were damaged). */
static VitStatus stat_entry(zip_t *za, const char *name, zip_uint64_t *idx, zip_stat_t *zs,
                            const char *fname, const char *what, VitError *err) {
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC;
    zip_int64_t i = zip_name_locate(za, name, 0);
    if (i < 0 || zip_stat_index(za, (zip_uint64_t)i, 0, zs) != 0 || (zs->valid & need) != need)
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: %s: entry '%s' is missing from the zip",
                             fname, what, name);
    if ((zs->valid & ZIP_STAT_ENCRYPTION_METHOD) && zs->encryption_method != ZIP_EM_NONE)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: entry '%s' is encrypted: vitlens reads plain torch.save zips",
                             fname, name);
    *idx = (zip_uint64_t)i;
    return VIT_OK;
}

/* Does a compressed entry of `size` bytes inflate from `comp` bytes by more than
 * PTH_MAX_INFLATE_RATIO, beyond `slack`? */
static int inflates_too_much(uint64_t size, uint64_t comp, uint64_t slack) {
    return size / PTH_MAX_INFLATE_RATIO > comp + slack / PTH_MAX_INFLATE_RATIO;
}

/* Entry idx (`name`, stat_entry'd by the caller, who checked that it holds `size` bytes)
 * whole into buf [size], its CRC-32 checked against the zip's directory: libzip checks it
 * only when a read asks past the entry's end, which a read of its size never does. A
 * stored entry is read raw (ZIP_FL_COMPRESSED: its bytes as they are, without libzip's
 * own pass over them), so that its CRC is computed once. */
static VitStatus read_entry(zip_t *za, zip_uint64_t idx, const char *name, uint8_t *buf,
                            size_t size, const char *fname, const char *what, VitError *err) {
    zip_stat_t zs;
    if (zip_stat_index(za, idx, 0, &zs) != 0) return zip_error(err, fname, name, zip_get_error(za));
    int raw = (zs.valid & ZIP_STAT_COMP_METHOD) && zs.comp_method == ZIP_CM_STORE;
    zip_file_t *zf = zip_fopen_index(za, idx, raw ? ZIP_FL_COMPRESSED : 0);
    if (!zf) return zip_error(err, fname, name, zip_get_error(za));
    size_t got = 0;
    while (got < size) {
        zip_int64_t r = zip_fread(zf, buf + got, size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    VitStatus rc = VIT_OK;
    uint32_t crc = got == size ? (uint32_t)crc32_z(crc32(0, Z_NULL, 0), buf, size) : 0;
    if (got < size)
        rc =
            vit_set_error(err, VIT_ERR_FORMAT,
                          "%s: %s: entry '%s' ends after %zu of %zu bytes (%s): truncated or "
                          "damaged",
                          fname, what, name, got, size, zip_error_strerror(zip_file_get_error(zf)));
    else if (crc != zs.crc)
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: entry '%s': CRC-32 mismatch (stored 0x%08x, computed 0x%08x): the "
                           "download is damaged",
                           fname, name, (unsigned)zs.crc, (unsigned)crc);
    zip_fclose(zf);
    return rc;
}

VitStatus pth_check_pickle(const uint8_t *pkl, size_t n, const char *fname, VitError *err) {
    Pkl p = pkl_new(fname, n, err);
    StFile st = {0};
    Val *root = NULL;
    const char *how = NULL;
    size_t total = 0;
    VitStatus rc = n > PKL_MAX_BYTES ? vit_set_error(err, VIT_ERR_FORMAT, "%s: too long", fname)
                                     : unpickle(&p, pkl, n, &root);
    const Val *sd = rc ? NULL : find_state_dict(root, &how, 0);
    if (!rc && !sd) rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: no state dict", fname);
    if (!rc) rc = layout_storages(&p, sd, &total);
    if (!rc) rc = table_from_dict(&p, &st, sd);
    st_free(&st);
    free_vals(&p);
    return rc;
}

int pth_is_zip(const uint8_t *file, size_t n) {
    return n >= 4 && !memcmp(file, "PK\3\4", 4);
}

int pth_is_legacy(const uint8_t *file, size_t n) {
    /* pickle protocol 2, then LONG1 of the legacy magic number 0x1950a86a20f9469cfc6c */
    static const uint8_t magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                    0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    return n >= sizeof magic && !memcmp(file, magic, sizeof magic);
}

VitStatus pth_parse(StFile *st, const uint8_t *file, size_t file_bytes, const char *fname,
                    VitError *err) {
    memset(st, 0, sizeof *st);
    Pkl p = pkl_new(fname, file_bytes, err);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = NULL;
    uint8_t *pkl = NULL, *data = NULL;
    VitStatus rc = VIT_OK;
    char entry[256], prefix[128];

    zip_source_t *src = zip_source_buffer_create(file, file_bytes, 0, &ze);
    if (!src || !(za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze))) {
        if (src) zip_source_free(src);
        rc = zip_error(err, fname, "not a readable zip", &ze);
        goto done;
    }
    /* <prefix>/data.pkl: the one pickle at depth 1 */
    zip_int64_t n_entries = zip_get_num_entries(za, 0), pkl_idx = -1;
    for (zip_int64_t e = 0; e < n_entries; e++) {
        const char *nm = zip_get_name(za, (zip_uint64_t)e, ZIP_FL_ENC_RAW);
        const char *slash = nm ? strchr(nm, '/') : NULL;
        if (!slash || strcmp(slash, "/data.pkl") != 0 || (size_t)(slash - nm) >= sizeof prefix)
            continue;
        if (pkl_idx >= 0) {
            rc = vit_set_error(err, VIT_ERR_FORMAT,
                               "%s: the zip holds more than one data.pkl: not a torch.save file",
                               fname);
            goto done;
        }
        pkl_idx = e;
        snprintf(prefix, sizeof prefix, "%.*s", (int)(slash - nm), nm);
    }
    if (pkl_idx < 0) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: a zip without <folder>/data.pkl: not a PyTorch checkpoint "
                           "(torch.save)",
                           fname);
        goto done;
    }
    snprintf(entry, sizeof entry, "%s/constants.pkl", prefix);
    if (zip_name_locate(za, entry, 0) >= 0) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: a TorchScript archive (torch.jit.save), not a state dict: in "
                           "Python, torch.save(torch.jit.load(path).state_dict(), \"model.pth\")",
                           fname);
        goto done;
    }
    zip_uint64_t idx;
    zip_stat_t zs;
    snprintf(entry, sizeof entry, "%s/byteorder", prefix);
    if (zip_name_locate(za, entry, 0) >= 0) {
        char bo[6];
        if ((rc = stat_entry(za, entry, &idx, &zs, fname, "byteorder", err))) goto done;
        if (zs.size == sizeof bo &&
            (rc = read_entry(za, idx, entry, (uint8_t *)bo, sizeof bo, fname, "byteorder", err)))
            goto done;
        if (zs.size != sizeof bo || memcmp(bo, "little", 6) != 0) {
            rc = vit_set_error(err, VIT_ERR_FORMAT,
                               "%s: the storages are not little-endian ('%s' says otherwise)",
                               fname, entry);
            goto done;
        }
    }
    snprintf(entry, sizeof entry, "%s/data.pkl", prefix);
    if ((rc = stat_entry(za, entry, &idx, &zs, fname, "data.pkl", err))) goto done;
    if (zs.size > PKL_MAX_BYTES || zs.size == 0) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: data.pkl is %llu bytes, expected 1 to %u (the limit)", fname,
                           (unsigned long long)zs.size, PKL_MAX_BYTES);
        goto done;
    }
    if (inflates_too_much(zs.size, zs.comp_size, PKL_INFLATE_SLACK)) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: data.pkl inflates to %llu bytes from %llu: more than %dx its "
                           "compressed size (a zip bomb?), refused before inflating",
                           fname, (unsigned long long)zs.size, (unsigned long long)zs.comp_size,
                           PTH_MAX_INFLATE_RATIO);
        goto done;
    }
    size_t pkl_n = (size_t)zs.size;
    if (!(pkl = malloc(pkl_n))) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", fname);
        goto done;
    }
    if ((rc = read_entry(za, idx, entry, pkl, pkl_n, fname, "data.pkl", err))) goto done;

    Val *root = NULL;
    if ((rc = unpickle(&p, pkl, pkl_n, &root))) goto done;
    const char *how = NULL;
    const Val *sd = find_state_dict(root, &how, 0);
    if (!sd) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: no state dict in the checkpoint (a dict of tensors, alone or "
                           "under 'model', 'state_dict', 'teacher', ...)",
                           fname);
        goto done;
    }
    size_t total = 0;
    if ((rc = layout_storages(&p, sd, &total)) || (rc = table_from_dict(&p, st, sd))) goto done;
    /* each storage used: its entry holds exactly its bytes and is no zip bomb, nor are
       they all together (whatever else the zip holds), before anything is allocated */
    uint64_t sum_bytes = 0, sum_comp = 0;
    for (int s = 0; s < p.n_storages; s++) {
        Storage *sg = &p.storages[s];
        if (!sg->used) continue;
        uint64_t bytes = (uint64_t)sg->numel * (uint64_t)sg->elem_bytes;
        snprintf(entry, sizeof entry, "%s/data/%s", prefix, sg->key);
        if ((rc = stat_entry(za, entry, &sg->entry, &zs, fname, "storage", err))) goto done;
        if (zs.size != bytes) {
            rc =
                vit_set_error(err, VIT_ERR_FORMAT,
                              "%s: storage: entry '%s' holds %llu bytes, the pickle says %llu",
                              fname, entry, (unsigned long long)zs.size, (unsigned long long)bytes);
            goto done;
        }
        if (inflates_too_much(bytes, zs.comp_size, PTH_INFLATE_SLACK)) {
            rc = vit_set_error(err, VIT_ERR_FORMAT,
                               "%s: entry '%s' inflates to %llu bytes from %llu: more than %dx "
                               "its compressed size (a zip bomb?), refused before inflating",
                               fname, entry, (unsigned long long)bytes,
                               (unsigned long long)zs.comp_size, PTH_MAX_INFLATE_RATIO);
            goto done;
        }
        sum_bytes += bytes;
        sum_comp += zs.comp_size;
    }
    if (inflates_too_much(sum_bytes, sum_comp, PTH_INFLATE_SLACK)) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: the storages inflate to %llu bytes from %llu: more than %dx "
                           "their compressed size (a zip bomb?), refused before inflating",
                           fname, (unsigned long long)sum_bytes, (unsigned long long)sum_comp,
                           PTH_MAX_INFLATE_RATIO);
        goto done;
    }
    if (!(data = calloc(total ? total : 1, 1))) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for %zu bytes of weights", fname,
                           total);
        goto done;
    }
    for (int s = 0; s < p.n_storages; s++) {
        Storage *sg = &p.storages[s];
        size_t bytes = (size_t)sg->numel * (size_t)sg->elem_bytes;
        if (!sg->used) continue;
        snprintf(entry, sizeof entry, "%s/data/%s", prefix, sg->key);
        if ((rc = read_entry(za, sg->entry, entry, data + sg->at, bytes, fname, "storage", err)))
            goto done;
    }
    st->data = data;
    st->data_bytes = total;
    st->owned = data;
    data = NULL;
    strip_prefixes(st);
    for (int i = 0; i < st->n; i++) st->tensors[i].data = st->data + st->tensors[i].begin;

done:
    if (rc) st_free(st);
    free(data);
    free(pkl);
    free_vals(&p);
    if (za) zip_discard(za);
    zip_error_fini(&ze);
    return rc;
}
