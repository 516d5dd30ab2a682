/* pth_objects.c - what a checkpoint's pickle may make (pth.h; the format: pth.c's top
 * comment): the closed list of globals (anything else refused by name), REDUCE of them
 * (OrderedDict, _rebuild_tensor_v2, _rebuild_parameter, argparse.Namespace), and the
 * storages BINPERSID names, found by key in a hash table. */
#include "pth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
int pkl_global_part_ok(Pkl *p, const char *op, const char *part, const char *s, size_t n,
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
Val *pkl_global(Pkl *p, const char *mod, const char *name) {
    Val *g = NULL;
    if (!strcmp(mod, "collections") && !strcmp(name, "OrderedDict")) {
        if ((g = pkl_val(p, V_GLOBAL))) g->aux = G_ORDERED_DICT;
        return g;
    }
    if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2")) {
        if ((g = pkl_val(p, V_GLOBAL))) g->aux = G_REBUILD_TENSOR;
        return g;
    }
    if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_parameter")) {
        if ((g = pkl_val(p, V_GLOBAL))) g->aux = G_REBUILD_PARAMETER;
        return g;
    }
    if (!strcmp(mod, "torch"))
        for (size_t i = 0; i < sizeof storage_types / sizeof *storage_types; i++)
            if (!strcmp(name, storage_types[i].name)) {
                if ((g = pkl_val(p, V_GLOBAL))) {
                    g->aux = G_STORAGE_TYPE;
                    g->i = (int64_t)i;
                }
                return g;
            }
    if (!strcmp(mod, "argparse") && !strcmp(name, "Namespace")) {
        /* timm's train.py and DINO save their args beside the weights: plain data, made
         * here into an opaque value (nothing is constructed, its fields are not read) */
        if ((g = pkl_val(p, V_GLOBAL))) g->aux = G_NAMESPACE;
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
    if (!sl) return pkl_nomem(p) != NULL;
    free(p->slots);
    p->slots = sl, p->n_slots = ns;
    for (int s = 0; s < p->n_storages; s++) {
        if (storage_find(p, p->storages[s].key, &h) != -1) return 0;
        p->slots[h] = s + 1;
    }
    return 1;
}

/* persistent id ('storage', storage_type, key, location, numel) -> a storage. */
Val *pkl_persistent_load(Pkl *p, const Val *pid, size_t at) {
    if (pid->kind != V_TUPLE || pid->n != 5 || !pkl_str_is(pid->items[0], "storage") ||
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
            if (!ns) return pkl_nomem(p);
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
    Val *v = pkl_val(p, V_STORAGE);
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
    Val *v = pkl_val(p, V_TENSOR);
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
int pkl_dict_set(Pkl *p, Val *d, Val *k, Val *v) {
    size_t n = d->n;
    d->n = 2 * n;
    int ok = pkl_push_item(p, d, k) && pkl_push_item(p, d, v);
    d->n = ok ? n + 1 : n;
    return ok;
}

Val *pkl_reduce(Pkl *p, const Val *fn, const Val *args, size_t at) {
    if (fn->kind != V_GLOBAL || args->kind != V_TUPLE) {
        vit_set_error(p->err, VIT_ERR_FORMAT,
                      "%s: data.pkl: REDUCE at byte %zu of something that is not an allowed "
                      "global: refused",
                      p->fname, at);
        return NULL;
    }
    switch ((GKind)fn->aux) {
    case G_ORDERED_DICT: { /* OrderedDict() or OrderedDict([(k, v), ...]) */
        Val *d = pkl_val(p, V_DICT);
        if (!d) return NULL;
        const Val *l = args->n == 1 ? args->items[0] : NULL;
        int ok = args->n == 0 || (l && (l->kind == V_LIST || l->kind == V_TUPLE));
        /* the pairs copied in one pass into an array sized once: a memo'd list of pairs
         * given to many REDUCEs (2 bytes each) costs its length each time, so this loop's
         * cost per pair bounds the time the budget allows (regress/pickle) */
        if (ok && l && l->n && !pkl_reserve(p, d, 2 * l->n)) return NULL;
        for (size_t i = 0; ok && l && i < l->n; i++) {
            const Val *kv = l->items[i];
            ok = kv->kind == V_TUPLE && kv->n == 2;
            if (ok) d->items[2 * i] = kv->items[0], d->items[2 * i + 1] = kv->items[1];
        }
        if (ok) {
            d->n = l ? l->n : 0; /* pairs */
            return d;
        }
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
    case G_NAMESPACE: return pkl_val(p, V_OPAQUE); /* Namespace(**kw): its fields dropped */
    case G_STORAGE_TYPE: break;
    }
    vit_set_error(p->err, VIT_ERR_FORMAT,
                  "%s: data.pkl: REDUCE at byte %zu calls a storage type: refused", p->fname, at);
    return NULL;
}
