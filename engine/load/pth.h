/* pth.h - inside the PyTorch checkpoint reader (engine/load/pth*.c; the format, the limits
 * and why each is there: pth.c's top comment): the unpickler's values and state, and the
 * steps one file of it calls in another.
 *   pth.c          the zip: its entries found, checked and read; pth_parse, pth_check_pickle
 *   pth_pickle.c   the pickle machine: values, the stack, the memo, the opcodes
 *   pth_objects.c  what the opcodes make: the allowed globals, REDUCE, BINPERSID (storages)
 *   pth_dict.c     the state dict: found under its wrappers, its tensors into the StFile
 * Not part of the engine's interface: internal.h declares what the loader calls. */
#ifndef VITLENS_PTH_H
#define VITLENS_PTH_H

#include "internal.h"

#include <zip.h>

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
                pth_find_state_dict has searched it */
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

/* --- pth_pickle.c: values and the machine ------------------------------------------ */

/* A Pkl for data.pkl of `fname`, its memory budget from the file's `file_bytes`. */
Pkl pkl_new(const char *fname, size_t file_bytes, VitError *err);
/* Free every value, the stack, the memo and the storages' table (a zeroed Pkl too). */
void pkl_free(Pkl *p);
/* Out of memory: err set, NULL returned. */
void *pkl_nomem(Pkl *p);
/* malloc(n), counted against the budget; NULL (err set) past it or out of memory. */
void *pkl_alloc(Pkl *p, size_t n);
/* A new value of kind k, zeroed; NULL (err set). */
Val *pkl_val(Pkl *p, VKind k);
/* Append x to container c's items; 0 (err set). */
int pkl_push_item(Pkl *p, Val *c, Val *x);
/* Room for n_items items in container c's array at once (counted against the budget as
 * pkl_push_item counts its growth); 0 (err set). */
int pkl_reserve(Pkl *p, Val *c, size_t n_items);
/* Is v the string lit, byte for byte (a NUL inside v is not an end)? */
int pkl_str_is(const Val *v, const char *lit);
/* Run the pickle [buf, buf + n); the object it returns into *out. */
VitStatus pkl_unpickle(Pkl *p, const uint8_t *buf, size_t n, Val **out);

/* --- pth_objects.c: globals, REDUCE, BINPERSID ---------------------------------------- */

/* A GLOBAL's module or name [n bytes] taken whole, else refused: 0, err set. */
int pkl_global_part_ok(Pkl *p, const char *op, const char *part, const char *s, size_t n,
                       size_t at);
/* GLOBAL module name: one of the allowed globals, else NULL (err set, the global named). */
Val *pkl_global(Pkl *p, const char *mod, const char *name);
/* persistent id ('storage', storage_type, key, location, numel) -> a storage (p->storages). */
Val *pkl_persistent_load(Pkl *p, const Val *pid, size_t at);
/* fn(*args) for an allowed global fn: a dict, a tensor, an opaque value; NULL (err set). */
Val *pkl_reduce(Pkl *p, const Val *fn, const Val *args, size_t at);
/* dict[k] = v, a dict's items kept as pairs (n pairs, 2n items); 0 (err set). */
int pkl_dict_set(Pkl *p, Val *d, Val *k, Val *v);

/* --- pth_dict.c: the state dict ------------------------------------------------------- */

/* The dict of tensors under v (v itself or a wrapper's key, *how), or NULL. */
const Val *pth_find_state_dict(Val *v, const char **how, int depth);
/* The storages sd's tensors use, laid out in one buffer of *total bytes. */
VitStatus pth_layout_storages(Pkl *p, const Val *sd, size_t *total);
/* sd's tensors into st's table, each checked against its storage. */
VitStatus pth_table_from_dict(Pkl *p, StFile *st, const Val *sd);
/* Strip the wrappers' prefixes of the names ("module.", "_orig_mod.", "backbone."). */
void pth_strip_prefixes(StFile *st);

#endif
