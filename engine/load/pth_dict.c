/* pth_dict.c - the state dict of a checkpoint's pickle (pth.h; the format: pth.c's top
 * comment): found under its wrappers' keys, its storages laid out in one buffer, its
 * tensors checked against them into the StFile's table, the wrappers' name prefixes
 * stripped. */
#include "pth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the state dict ------------------------------------------------------------------- */

static int dict_has_tensor(const Val *d) {
    for (size_t i = 0; i < d->n; i++)
        if (d->items[2 * i]->kind == V_STR && d->items[2 * i + 1]->kind == V_TENSOR) return 1;
    return 0;
}

static Val *dict_get(const Val *d, const char *key) {
    for (size_t i = 0; i < d->n; i++)
        if (pkl_str_is(d->items[2 * i], key)) return d->items[2 * i + 1];
    return NULL;
}

/* The dict of tensors: the object itself, or under a wrapper's key (timm/DeiT "model",
 * Lightning "state_dict", DINO "teacher", ...), depth-first. *how: the wrapper key. Each
 * dict is searched once (marked): one met again, shared by two keys or holding itself
 * through the memo, has nothing new, so the search is linear in the items. */
const Val *pth_find_state_dict(Val *v, const char **how, int depth) {
    static const char *const keys[] = {"state_dict", "model_state_dict", "model", "teacher",
                                       "student",    "module",           "net",   "model_ema"};
    if (v->kind != V_DICT || v->aux || depth > PKL_MAX_DEPTH) return NULL;
    v->aux = 1;
    if (dict_has_tensor(v)) return v;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        Val *c = dict_get(v, keys[k]);
        const Val *r = c ? pth_find_state_dict(c, how, depth + 1) : NULL;
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
VitStatus pth_layout_storages(Pkl *p, const Val *sd, size_t *total) {
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
void pth_strip_prefixes(StFile *st) {
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
 * read), each checked against its storage (laid out by pth_layout_storages). */
VitStatus pth_table_from_dict(Pkl *p, StFile *st, const Val *sd) {
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
