/* fuzz_pickle_ops.c - libFuzzer target: a checkpoint's data.pkl written from a grammar.
 *
 * fuzz_pickle mutates bytes: it rarely makes a pickle that gets past the opcodes into the
 * state-dict search with a structure that matters (a dict that holds itself, 65536
 * storages, millions of values). Here the input is a program of choices (fuzzlib.h) that
 * writes a protocol-2 pickle value by value, the way torch.save does:
 *
 *   value := state dict   GLOBAL collections.OrderedDict, EMPTY_TUPLE, REDUCE, then
 *                         MARK (name tensor)* SETITEMS
 *          | dict | list | tuple   EMPTY_DICT / EMPTY_LIST + MARK items SETITEMS / APPENDS,
 *                         MARK items TUPLE, TUPLE1-3, EMPTY_TUPLE
 *          | tensor       GLOBAL torch._utils._rebuild_tensor_v2, MARK storage offset
 *                         (shape) (stride) False OrderedDict() TUPLE REDUCE; or wrapped in
 *                         _rebuild_parameter; shapes, strides and offsets of 0, 1, small,
 *                         2^31, 2^40, INT64_MAX
 *          | storage      MARK 'storage' GLOBAL torch.<type> key 'cpu' numel TUPLE
 *                         BINPERSID, with a new key or one used before
 *          | memo get     BINGET / LONG_BINGET of an index put before, of a container
 *                         still being built (a dict that holds itself), or of a bad one
 *          | chain        levels dicts, each holding the one below under 1 to 3 keys
 *                         (wrapper keys mostly: "model", "state_dict", ...) by BINGET, or
 *                         holding itself: a DAG of 2^levels paths for the wrapper search
 *          | repeat       a leaf value and POP, the bytes copied k times (k up to 2^24),
 *                         then a value: millions of values from 16 MB of opcodes, which
 *                         deflate to a zip of kilobytes
 *          | int | string | None | bool | a global (allowed, or refused: os.system, ...)
 *          | argparse.Namespace (NEWOBJ, BUILD) | a raw opcode (POP, DUP, BUILD, ...)
 *
 * with each container's values memoised (BINPUT / LONG_BINPUT) or not, and counts that
 * are small (each item from its own choices) or, now and then, up to 2^24 repetitions of
 * one item: written again from the same choices (a new key each time: 65536 storages) or
 * its bytes copied (APPENDS of one memoised value millions of times).
 *
 * One input in 8 is wrapped as torch.save does (archive/data.pkl, archive/version,
 * archive/byteorder, archive/data/<key> for the storages, stored or deflated, with libzip
 * in memory) and goes through vit_load as in fuzz_pth; the others go to pth_check_pickle
 * as in fuzz_pickle. The checks are those targets': the error contract, no leak, no bad
 * read; and, with the limits the fuzz build runs under (2 s, 512 MB), no hang and no
 * blow-up. Writing stays well within the 2 s: the writer's calls are bounded by
 * PKL_MAX_CALLS (4 M calls, byte by byte, took 0.5 s in the fuzz build), and what is large
 * is copied in bulk (out_repeat), up to PKL_OUT_MAX bytes. Reading is linear but not free
 * in the fuzz build (~170 ns an opcode with its coverage hooks: 16 MB of "N0" took 1.4 s
 * on a Zen 1 core, 3 s before None was a constant), so PKL_OUT_MAX keeps a whole run under
 * a second on a busy machine; the loader's own limit (64 MiB) is a case of the malformed
 * catalogue (pth_pickle_too_long). */
#include "fuzzlib.h"
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#define PKL_OUT_MAX   (6u << 20) /* bytes: 3 M opcodes, 0.5 s to read in the fuzz build */
#define PKL_MAX_CALLS (2u << 20) /* writer calls: 0.25 s in the fuzz build */
#define PKL_ZIP_STORE (8u << 20) /* a larger data.pkl is deflated, not stored: less memory */
#define MAX_DEPTH     8          /* nesting of the values written */
#define MAX_STORAGES  64         /* storages the zip gets an entry for */
#define MAX_ENTRY_OUT (1u << 16) /* a storage entry's bytes, at most */

/* --- the tables the choices pick from --------------------------------------------- */

static const char *const strings[] = {
    "model",
    "state_dict",
    "module",
    "teacher",
    "student",
    "net",
    "model_ema",
    "model_state_dict",
    "storage",
    "cpu",
    "0",
    "1",
    "2",
    "9",
    "",
    "a/b",
    "cls_token",
    "blocks.0.norm1.weight",
    "module.cls_token",
    "epoch",
    "a name of seventy characters, longer than the 64 bytes of a storage's key"};
/* the keys the loader looks under for the state dict (pth.c, find_state_dict) */
static const char *const wrappers[] = {"state_dict", "model_state_dict", "model", "teacher",
                                       "student",    "module",           "net",   "model_ema"};
/* tensor names: timm's, so that a zip may load; DataParallel's prefix */
static const char *const names[] = {"cls_token",
                                    "pos_embed",
                                    "patch_embed.proj.weight",
                                    "patch_embed.proj.bias",
                                    "blocks.0.norm1.weight",
                                    "blocks.0.attn.qkv.weight",
                                    "norm.weight",
                                    "head.weight",
                                    "module.cls_token",
                                    "backbone.pos_embed",
                                    "blocks.1.norm1.weight"};
static const int64_t ints[] = {0,
                               1,
                               2,
                               3,
                               4,
                               8,
                               16,
                               -1,
                               255,
                               65535,
                               65536,
                               (int64_t)1 << 31,
                               (int64_t)1 << 40,
                               INT64_MAX,
                               INT64_MIN,
                               (int64_t)1 << 62};
static const struct {
    const char *mod, *name;
} globals[] = {
    {"collections", "OrderedDict"},
    {"torch._utils", "_rebuild_tensor_v2"},
    {"torch._utils", "_rebuild_parameter"},
    {"torch", "FloatStorage"},
    {"torch", "HalfStorage"},
    {"torch", "BFloat16Storage"},
    {"torch", "LongStorage"},
    {"torch", "DoubleStorage"},
    {"argparse", "Namespace"},
    {"torch", "ComplexFloatStorage"}, /* refused from here on */
    {"os", "system"},
    {"builtins", "eval"},
    {"__main__", "ViT"},
    {"torch.nn.modules.linear", "Linear"},
};
#define N_ALLOWED_GLOBALS 9
static const struct {
    const char *name;
    int bytes;
} storage_types[] = {{"FloatStorage", 4}, {"HalfStorage", 2},   {"BFloat16Storage", 2},
                     {"LongStorage", 8},  {"DoubleStorage", 8}, {"ComplexFloatStorage", 8}};
/* opcodes written raw, for the unpickler's refusals and stack checks */
static const uint8_t raw_ops[] = {'0', '1', '2', 'b',  'R',  0x81, 's', 'u',  'a',  'e', 't', 'l',
                                  'd', '(', '.', 0x85, 0x86, 0x87, 'Q', 0x93, 0x80, 'N', 'S', 'p'};

/* --- the writer ------------------------------------------------------------------ */

typedef struct {
    char key[16];
    int64_t bytes;
} StorageOut;

typedef struct {
    Choices c;
    Out o;
    unsigned serial; /* new keys and names: "%u" of it */
    unsigned memo_n; /* memo indices put so far: 0 .. memo_n - 1 */
    StorageOut st[MAX_STORAGES];
    int n_st;
    int64_t open[MAX_DEPTH + 2]; /* memo index of each container being built, or -1 */
    int n_open;
    size_t calls; /* writer calls, up to PKL_MAX_CALLS */
} Gen;

#define PICK(n)  pick(&g->c, (unsigned)(n))
#define COUNT(a) (sizeof(a) / sizeof *(a))
/* Choice 0 (and an input's end) takes the usual path: RARELY(n) is one choice in n. */
#define RARELY(n) (PICK(n) == (n)-1)

/* Every write: counted, so that a program of many small writes stops in time. */
static void put(Gen *g, const void *b, size_t n) {
    if (++g->calls > PKL_MAX_CALLS) g->o.over = 1;
    out_put(&g->o, b, n);
}

static void op(Gen *g, uint8_t b) {
    put(g, &b, 1);
}

static void u32(Gen *g, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(g, b, 4);
}

/* BINUNICODE, no choice read (in loops whose every turn writes the same) */
static void str_fixed(Gen *g, const char *s) {
    op(g, 'X');
    u32(g, (uint32_t)strlen(s));
    put(g, s, strlen(s));
}

/* BINPUT / LONG_BINPUT, BINGET / LONG_BINGET of idx, no choice read */
static void put_idx(Gen *g, uint32_t idx) {
    op(g, idx < 256 ? 'q' : 'r');
    if (idx < 256)
        op(g, (uint8_t)idx);
    else
        u32(g, idx);
}

static void get_idx(Gen *g, uint32_t idx) {
    op(g, idx < 256 ? 'h' : 'j');
    if (idx < 256)
        op(g, (uint8_t)idx);
    else
        u32(g, idx);
}

/* BINUNICODE or SHORT_BINUNICODE */
static void str(Gen *g, const char *s) {
    size_t n = strlen(s);
    if (n < 256 && RARELY(4)) {
        op(g, 0x8c);
        op(g, (uint8_t)n);
    } else {
        op(g, 'X');
        u32(g, (uint32_t)n);
    }
    put(g, s, n);
}

/* BININT1 / BININT2 / BININT as they fit, else LONG1 (or LONG1 anyway, now and then) */
static void integer(Gen *g, int64_t v) {
    if (v >= 0 && v < 256 && !RARELY(8)) {
        op(g, 'K');
        op(g, (uint8_t)v);
    } else if (v >= 0 && v < 65536 && !RARELY(8)) {
        op(g, 'M');
        op(g, (uint8_t)v);
        op(g, (uint8_t)(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX && !RARELY(8)) {
        op(g, 'J');
        u32(g, (uint32_t)(int32_t)v);
    } else {
        op(g, 0x8a);
        op(g, 8);
        for (int i = 0; i < 8; i++) op(g, (uint8_t)((uint64_t)v >> (8 * i)));
    }
}

static void global(Gen *g, const char *mod, const char *name) {
    if (RARELY(4)) { /* protocol 4's STACK_GLOBAL */
        str(g, mod);
        str(g, name);
        op(g, 0x93);
        return;
    }
    op(g, 'c');
    put(g, mod, strlen(mod));
    op(g, '\n');
    put(g, name, strlen(name));
    op(g, '\n');
}

/* After a container or a storage: memoise it (at the next index, torch.save's way, or at
 * a small one that may overwrite), or not. Returns the index, or -1. */
static int64_t memo_put(Gen *g) {
    unsigned k = PICK(4);
    if (k == 0) return -1;
    uint32_t idx = k == 3 ? PICK(8) : g->memo_n++;
    if (idx < 256 && !RARELY(4)) {
        op(g, 'q');
        op(g, (uint8_t)idx);
    } else {
        op(g, 'r');
        u32(g, idx);
    }
    return idx;
}

/* A container being built: its memo index (or -1) on g->open while its items are written,
 * so that an item may be the container itself. */
static void open_push(Gen *g, int64_t idx) {
    if (g->n_open < (int)COUNT(g->open)) g->open[g->n_open++] = idx;
}

static void open_pop(Gen *g) {
    if (g->n_open) g->n_open--;
}

/* An index put before (any), a container being built (itself or one around it), or a bad
 * one. */
static void memo_get(Gen *g) {
    static const uint32_t bad[] = {255, 256, 65535, (1u << 20) - 1, 1u << 20, UINT32_MAX};
    unsigned k = PICK(8);
    uint32_t idx = PICK(g->memo_n ? g->memo_n : 1);
    if (k == 7) idx = bad[PICK(COUNT(bad))];
    if (k == 6 && g->n_open) { /* the innermost memoised container, or one around it */
        int i = g->n_open - 1 - (int)PICK((unsigned)g->n_open);
        for (int j = i; j >= 0; j--)
            if (g->open[j] >= 0) {
                idx = (uint32_t)g->open[j];
                break;
            }
    }
    if (idx < 256 && !RARELY(4)) {
        op(g, 'h');
        op(g, (uint8_t)idx);
    } else {
        op(g, 'j');
        u32(g, idx);
    }
}

/* How items repeat: each from its own choices; each from the same choices (the program's
 * position rewound: new keys and names each time); or the first one's bytes copied. */
typedef enum { FRESH, REWRITE, COPY } Rep;

/* How many items: mostly 0 to 4 (1 by default); one time in 16 a repetition of up to 2^24. */
static unsigned count(Gen *g, Rep *rep) {
    *rep = FRESH;
    if (!RARELY(16)) return (PICK(5) + 1) % 5;
    *rep = PICK(2) ? COPY : REWRITE;
    unsigned e = PICK(25);
    return (1u << e) + PICK(1u << (e < 8 ? e : 8));
}

static void value(Gen *g, int depth);

static void items(Gen *g, unsigned n, Rep rep, void (*item)(Gen *, int), int depth) {
    if (rep == COPY && n) {
        size_t at = g->o.n;
        item(g, depth);
        out_repeat(&g->o, at, n - 1);
        return;
    }
    size_t start = g->c.at, end = start;
    for (unsigned i = 0; i < n && !g->o.over; i++) {
        if (rep == REWRITE) g->c.at = start;
        item(g, depth);
        end = g->c.at;
    }
    g->c.at = end;
}

static void new_key(Gen *g, char *out, size_t n) {
    snprintf(out, n, "%u", g->serial++);
}

/* ('storage', torch.<type>, key, 'cpu', numel) BINPERSID; numel: `numel`, or another */
static void storage(Gen *g, int64_t numel) {
    char key[16];
    unsigned t = !RARELY(8) ? 0 : PICK(COUNT(storage_types));
    if (!RARELY(4))
        new_key(g, key, sizeof key);
    else
        snprintf(key, sizeof key, "%u", PICK(4));
    if (RARELY(8)) numel = ints[PICK(COUNT(ints))];
    op(g, '(');
    str(g, "storage");
    global(g, "torch", storage_types[t].name);
    memo_put(g);
    str(g, key);
    str(g, !RARELY(8) ? "cpu" : "cuda:0");
    integer(g, numel);
    op(g, 't');
    memo_put(g);
    op(g, 'Q');
    memo_put(g);
    if (g->n_st < MAX_STORAGES && numel >= 0) {
        StorageOut *s = &g->st[g->n_st++];
        snprintf(s->key, sizeof s->key, "%s", key);
        s->bytes = numel <= INT64_MAX / 8 ? numel * storage_types[t].bytes : INT64_MAX;
    }
}

/* _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()) */
static void tensor(Gen *g, int depth) {
    (void)depth;
    int wrap = RARELY(4); /* nn.Parameter: _rebuild_parameter(tensor, True, OrderedDict()) */
    if (wrap) {
        global(g, "torch._utils", "_rebuild_parameter");
        op(g, '(');
    }
    global(g, "torch._utils", "_rebuild_tensor_v2");
    op(g, '(');
    int ndim = (int)PICK(5);
    int64_t shape[4], stride[4];
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) /* small, or one of the table's */
        shape[d] = !RARELY(4) ? 1 + PICK(4) : ints[PICK(COUNT(ints))];
    for (int d = ndim - 1; d >= 0; d--) { /* contiguous, or not */
        stride[d] = !RARELY(8) ? (int64_t)numel : ints[PICK(COUNT(ints))];
        numel *= (uint64_t)shape[d];
    }
    int64_t offset = !RARELY(4) ? 0 : ints[PICK(COUNT(ints))];
    if (!RARELY(16))
        storage(g, (int64_t)(numel + (uint64_t)(offset > 0 ? offset : 0)));
    else
        value(g, MAX_DEPTH); /* something else where the storage goes */
    integer(g, offset);
    int sdim = !RARELY(8) ? ndim : (int)PICK(5); /* size and stride of the same dims, or not */
    for (int k = 0; k < 2; k++) {
        int nd = k ? sdim : ndim;
        op(g, '(');
        for (int d = 0; d < nd; d++) integer(g, k ? (d < ndim ? stride[d] : 1) : shape[d]);
        op(g, 't');
        memo_put(g);
    }
    op(g, 0x89); /* requires_grad False */
    global(g, "collections", "OrderedDict");
    op(g, ')');
    op(g, 'R');
    op(g, 't');
    op(g, 'R');
    memo_put(g);
    if (wrap) {
        op(g, 0x88);
        global(g, "collections", "OrderedDict");
        op(g, ')');
        op(g, 'R');
        op(g, 't');
        op(g, 'R');
        memo_put(g);
    }
}

/* A state dict's entry: a name (timm's, or a new one), a tensor (or anything). */
static void entry(Gen *g, int depth) {
    char nm[16];
    if (RARELY(2)) {
        new_key(g, nm, sizeof nm);
        str(g, nm);
    } else {
        str(g, names[PICK(COUNT(names))]);
    }
    if (!RARELY(8))
        tensor(g, depth);
    else
        value(g, depth + 1);
}

/* A wrapper's entry: a key (a wrapper's, torch.save's, any), a value. */
static void pair(Gen *g, int depth) {
    str(g, strings[PICK(COUNT(strings))]);
    value(g, depth + 1);
}

static void element(Gen *g, int depth) {
    value(g, depth + 1);
}

/* `levels` dicts, each holding the one below under 1 to 3 keys or holding itself (the
 * DAG of pth.c's wrapper search: 2^levels paths with two keys; a cycle), on a bottom value
 * (None by default: no state dict, every path is walked).
 * Each level: POP the one below, EMPTY_DICT, BINPUT, (key BINGET SETITEM) per key. */
static void chain(Gen *g, int depth) {
    if (!RARELY(4)) /* the bottom: None, or any value */
        op(g, 'N');
    else
        value(g, depth + 1);
    uint32_t below = g->memo_n++;
    put_idx(g, below);
    /* by default 32 levels under two wrapper keys each: 2^32 paths */
    unsigned levels = RARELY(8) ? 1 + PICK(1024) : 1 + (PICK(64) + 31) % 64;
    unsigned n_keys = 1 + (PICK(3) + 1) % 3;
    const char *key[3];
    for (unsigned j = 0; j < n_keys; j++)
        key[j] = !RARELY(4) ? wrappers[(PICK(COUNT(wrappers)) + j) % COUNT(wrappers)]
                            : strings[PICK(COUNT(strings))];
    int self = RARELY(4);
    for (unsigned l = 0; l < levels && !g->o.over; l++) {
        op(g, '0');
        op(g, '}');
        uint32_t cur = g->memo_n++;
        put_idx(g, cur);
        for (unsigned j = 0; j < n_keys; j++) {
            str_fixed(g, key[j]);
            get_idx(g, self ? cur : below);
            op(g, 's');
        }
        below = cur;
    }
}

/* A leaf and POP, k times (the bytes copied: k up to 2^24 costs no more to write than 1;
 * by default EMPTY_TUPLE POP 2^23 times: 16 MB, 8 M values), then a value. The leaf: one
 * opcode that makes a value (EMPTY_TUPLE, NONE, EMPTY_DICT, EMPTY_LIST, NEWTRUE), a memo
 * get (no value: a reference), or any leaf value. */
static void repeat(Gen *g, int depth) {
    static const uint8_t cheap[] = {')', 'N', '}', ']', 0x88};
    unsigned e = (PICK(25) + 23) % 25;
    unsigned k = (1u << e) + PICK(256);
    size_t at = g->o.n;
    unsigned leaf = PICK(8);
    if (leaf < COUNT(cheap))
        op(g, cheap[leaf]);
    else if (leaf == COUNT(cheap))
        memo_get(g);
    else
        value(g, MAX_DEPTH);
    op(g, '0');
    out_repeat(&g->o, at, k - 1);
    value(g, depth + 1);
}

/* The container just pushed, memoised (or not), then MARK, its items and `close`
 * (SETITEMS, APPENDS), as torch.save fills a dict or a list. */
static void filled(Gen *g, void (*item)(Gen *, int), uint8_t close, int depth) {
    Rep rep;
    open_push(g, memo_put(g));
    op(g, '(');
    unsigned n = count(g, &rep);
    items(g, n, rep, item, depth);
    op(g, close);
    open_pop(g);
}

static void value(Gen *g, int depth) {
    unsigned k = depth >= MAX_DEPTH ? 4 + PICK(10) : PICK(18);
    Rep rep;
    unsigned n;
    switch (k) {
    case 0: /* OrderedDict() filled by SETITEMS: torch.save's state dict */
    case 1:
        global(g, "collections", "OrderedDict");
        op(g, ')');
        op(g, 'R');
        filled(g, entry, 'u', depth);
        if (RARELY(4)) { /* its _metadata, by BUILD */
            op(g, '}');
            op(g, 'b');
        }
        break;
    case 2: /* a dict: a wrapper ({'model': ..., 'epoch': 1}) */
        op(g, '}');
        open_push(g, memo_put(g));
        if (!RARELY(4)) {
            op(g, '(');
            n = count(g, &rep);
            items(g, n, rep, pair, depth);
            op(g, 'u');
        } else {
            pair(g, depth);
            op(g, 's');
        }
        open_pop(g);
        break;
    case 3: /* a list */
        op(g, ']');
        filled(g, element, 'e', depth);
        break;
    case 4: /* a tensor */
    case 5: tensor(g, depth); break;
    case 6: /* a memo reference: maybe a container being built, itself */
    case 7: memo_get(g); break;
    case 8: {
        int64_t v = ints[PICK(COUNT(ints))];
        integer(g, v);
        break;
    }
    case 9: str(g, strings[PICK(COUNT(strings))]); break;
    case 10: /* a storage alone */ storage(g, ints[PICK(COUNT(ints))]); break;
    case 11: { /* a tuple */
        n = PICK(5);
        if (n >= 1 && n <= 3 && PICK(2)) {
            for (unsigned i = 0; i < n; i++) value(g, depth + 1);
            op(g, (uint8_t)(0x84 + n));
        } else if (n == 0) {
            op(g, ')');
        } else {
            op(g, '(');
            rep = FRESH;
            if (n == 4) n = count(g, &rep);
            items(g, n, rep, element, depth);
            op(g, 't');
        }
        memo_put(g);
        break;
    }
    case 12: { /* a global, maybe called */
        unsigned i = PICK(COUNT(globals));
        global(g, globals[i].mod, globals[i].name);
        if (PICK(2)) {
            op(g, '(');
            items(g, PICK(3), FRESH, element, depth);
            op(g, 't');
            op(g, i == N_ALLOWED_GLOBALS - 1 && PICK(2) ? 0x81 : 'R');
            if (PICK(2)) {
                op(g, '}');
                op(g, 'b'); /* BUILD: a Namespace's fields */
            }
        }
        break;
    }
    case 13: /* None, True, False */ op(g, (const uint8_t[]){'N', 0x88, 0x89}[PICK(3)]); break;
    case 14: /* a raw opcode, below */
    case 15: break;
    case 16: chain(g, depth); return;
    case 17: repeat(g, depth); return;
    }
    if (k == 14 || k == 15) { /* a raw opcode after a value, maybe with a byte of argument */
        value(g, MAX_DEPTH);
        op(g, raw_ops[PICK(COUNT(raw_ops))]);
        if (PICK(2)) op(g, (uint8_t)PICK(256));
    }
}

/* --- the pickle into a torch.save zip --------------------------------------------- */

static void add_entry(zip_t *za, const char *name, const void *b, size_t n, int deflate) {
    zip_source_t *s = zip_source_buffer(za, b, n, 0);
    zip_int64_t i = s ? zip_file_add(za, name, s, ZIP_FL_OVERWRITE) : -1;
    if (i < 0) {
        if (s) zip_source_free(s);
        return; /* a duplicate key, say */
    }
    zip_set_file_compression(za, (zip_uint64_t)i, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 1);
}

/* archive/data.pkl and the storages' entries, as torch.save writes them; NULL when libzip
 * cannot (it only fails out of memory). *n: the zip's bytes. */
static uint8_t *make_zip(const Gen *g, int deflate, size_t *n) {
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_t *za = src ? zip_open_from_source(src, ZIP_TRUNCATE, &ze) : NULL;
    uint8_t *file = NULL, *data = NULL;
    if (!za) goto done;
    zip_source_keep(src);
    add_entry(za, "archive/data.pkl", g->o.p, g->o.n, deflate);
    add_entry(za, "archive/version", "3\n", 2, 0);
    add_entry(za, "archive/byteorder", "little", 6, 0);
    size_t most = 1;
    for (int s = 0; s < g->n_st; s++)
        if (g->st[s].bytes > (int64_t)most) most = (size_t)g->st[s].bytes;
    if (most > MAX_ENTRY_OUT) most = MAX_ENTRY_OUT;
    if (!(data = calloc(most, 1))) goto done; /* zeros: finite weights of any dtype */
    for (int s = 0; s < g->n_st; s++) {
        char name[64];
        snprintf(name, sizeof name, "archive/data/%s", g->st[s].key);
        size_t b = g->st[s].bytes > (int64_t)most ? most : (size_t)g->st[s].bytes;
        add_entry(za, name, data, b, deflate);
    }
    if (zip_close(za) != 0) {
        zip_discard(za);
        goto done;
    }
    zip_stat_t st;
    if (zip_source_stat(src, &st) == 0 && zip_source_open(src) == 0) {
        if ((file = malloc(st.size ? st.size : 1)) &&
            zip_source_read(src, file, st.size) != (zip_int64_t)st.size) {
            free(file);
            file = NULL;
        }
        *n = st.size;
        zip_source_close(src);
    }
done:
    if (src) zip_source_free(src);
    free(data);
    zip_error_fini(&ze);
    return file;
}

/* --- entry point ------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Gen *g = calloc(1, sizeof *g);
    if (!g) abort();
    g->c = (Choices){.p = data, .n = size};
    g->o.max = PKL_OUT_MAX;
    unsigned mode = PICK(16); /* 14, 15: a zip, stored, deflated; else data.pkl alone */
    if (!RARELY(8)) {
        op(g, 0x80); /* PROTO 2 */
        op(g, 2);
    }
    value(g, 0);
    op(g, '.');
    if (!g->o.over) {
        if (mode < 14) {
            fuzz_dump(g->o.p, g->o.n);
            VitError err;
            memset(&err, 'x', sizeof err);
            VitStatus rc = pth_check_pickle(g->o.p, g->o.n, "data.pkl", &err);
            fuzz_check_error(rc, &err, "pth_check_pickle");
        } else { /* the pickle freed before the load, which inflates its own copy */
            static MemFile f;
            size_t n = 0;
            uint8_t *zip = make_zip(g, mode == 15 || g->o.n > PKL_ZIP_STORE, &n);
            free(g->o.p);
            g->o.p = NULL;
            if (zip) fuzz_dump(zip, n), fuzz_model_input(&f, "model.pth", zip, n);
            free(zip);
        }
    }
    free(g->o.p);
    free(g);
    return 0;
}
