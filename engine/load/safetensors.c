/* safetensors.c - parse and validate a .safetensors header.
 *
 * Format (huggingface/safetensors): 8-byte little-endian u64 N, then N bytes of
 * JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 * ..., "__metadata__": {..}}, then the data area. Offsets are relative to the
 * data area. Everything here is checked before any tensor byte is touched:
 * a hostile file gets a message, never a read outside the mapping. */
#include "internal.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- errors ---------------------------------------------------------------- */

/* Bytes of the UTF-8 character at s (1 to 4) when it is valid and not a C1 control,
 * else 0. */
static int utf8_char(const unsigned char *s) {
    int n = s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;
    if (!n) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) return 0;  /* C1: U+0080..U+009F */
    if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;  /* overlong */
    if (n == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0; /* surrogate */
    if (n == 4 && s[0] == 0xf0 && s[1] < 0x90) return 0;  /* overlong */
    if (n == 4 && s[0] == 0xf4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
    return n;
}

char *vit_escape(char *out, size_t cap, const char *in) {
    static const char hex[] = "0123456789abcdef";
    if (!cap) return out;
    const unsigned char *s = (const unsigned char *)in;
    size_t k = 0;
    while (*s) {
        int n = *s >= 0x20 && *s < 0x7f ? 1 : *s >= 0x80 ? utf8_char(s) : 0;
        if (n) {
            if (k + (size_t)n >= cap) break;
            memcpy(out + k, s, (size_t)n);
            k += (size_t)n, s += n;
        } else {
            if (k + 4 >= cap) break;
            out[k++] = '\\', out[k++] = 'x', out[k++] = hex[*s >> 4], out[k++] = hex[*s & 15];
            s++;
        }
    }
    out[k] = '\0';
    return out;
}

VitStatus vit_set_error(VitError *err, VitStatus code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        char raw[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        vit_escape(err->msg, sizeof err->msg, raw); /* names from the file: no terminal codes */
    }
    return code;
}

const char *vit_basename(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

const char *vit_status_name(VitStatus s) {
    switch (s) {
    case VIT_OK: return "ok";
    case VIT_ERR_IO: return "i/o";
    case VIT_ERR_FORMAT: return "format";
    case VIT_ERR_SHAPE: return "shape";
    case VIT_ERR_NOMEM: return "out of memory";
    case VIT_ERR_ARG: return "argument";
    case VIT_ERR_IMAGE: return "image";
    case VIT_ERR_CANCELLED: return "cancelled";
    }
    return "unknown";
}

/* --- helpers --------------------------------------------------------------- */

const char *st_shape_str(char *buf, size_t n, const int64_t *shape, int ndim) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

static int dtype_info(const char *s, StDtype *dt) {
    static const struct {
        const char *name;
        int bytes;
        StDtype dt;
    } tab[] = {
        {"F32", 4, ST_F32},    {"F16", 2, ST_F16},       {"BF16", 2, ST_BF16},
        {"F64", 8, ST_OTHER},  {"I64", 8, ST_OTHER},     {"I32", 4, ST_OTHER},
        {"I16", 2, ST_OTHER},  {"I8", 1, ST_OTHER},      {"U64", 8, ST_OTHER},
        {"U32", 4, ST_OTHER},  {"U16", 2, ST_OTHER},     {"U8", 1, ST_OTHER},
        {"BOOL", 1, ST_OTHER}, {"F8_E4M3", 1, ST_OTHER}, {"F8_E5M2", 1, ST_OTHER},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(s, tab[i].name) == 0) {
            *dt = tab[i].dt;
            return tab[i].bytes;
        }
    return 0;
}

/* A JSON number that is a non-negative integer exactly representable. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double v = j->valuedouble;
    if (!(v >= 0.0) || v > 9007199254740992.0 || floor(v) != v) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const StTensor *const *)a)->name, (*(const StTensor *const *)b)->name);
}

/* One header entry e (not __metadata__) into t (its name already set): dtype, shape and
 * data offsets, each checked against the data area of data_bytes. */
static VitStatus parse_entry(StTensor *t, const cJSON *e, size_t data_bytes, const char *name,
                             VitError *err) {
    const char *tn = t->name;
    char sbuf[160];
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd))
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: tensor '%s': missing string 'dtype'", name,
                             tn);
    t->elem_bytes = dtype_info(jd->valuestring, &t->dtype);
    if (!t->elem_bytes)
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", name,
                             tn, jd->valuestring);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", jd->valuestring);

    if (!cJSON_IsArray(js) || cJSON_GetArraySize(js) > ST_MAX_DIMS)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: tensor '%s': 'shape' must be an array of at most %d sizes", name,
                             tn, ST_MAX_DIMS);
    for (const cJSON *d = js->child; d; d = d->next) {
        uint64_t v; /* at most 2^53 */
        if (!json_uint(d, &v))
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: tensor '%s': shape entries must be non-negative integers",
                                 name, tn);
        t->shape[t->ndim++] = (int64_t)v;
    }
    size_t n_elems, n_bytes;
    if (!vit_shape_elems(&n_elems, t->shape, t->ndim) ||
        !vit_size_mul(&n_bytes, n_elems, (size_t)t->elem_bytes))
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: tensor '%s': shape %s overflows", name, tn,
                             st_shape_str(sbuf, sizeof sbuf, t->shape, t->ndim));
    t->n_elems = n_elems;

    uint64_t b, en;
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || !json_uint(jo->child, &b) ||
        !json_uint(jo->child->next, &en))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: tensor '%s': 'data_offsets' must be [begin, end] integers", name,
                             tn);
    if (b > en)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] are reversed", name, tn,
                             (unsigned long long)b, (unsigned long long)en);
    if (en > data_bytes)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] end past the data area "
                             "(%zu bytes): file truncated?",
                             name, tn, (unsigned long long)b, (unsigned long long)en, data_bytes);
    t->begin = (size_t)b;
    t->end = (size_t)en;
    if (t->end - t->begin != n_bytes)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: tensor '%s': %zu bytes in data_offsets, expected %zu "
                             "(shape %s x %d bytes per %s)",
                             name, tn, t->end - t->begin, n_bytes,
                             st_shape_str(sbuf, sizeof sbuf, t->shape, t->ndim), t->elem_bytes,
                             t->dtype_name);
    return VIT_OK;
}

/* The table as a whole: no name twice, no two non-empty tensors overlapping. order: [st->n]
 * scratch. */
static VitStatus check_layout(const StFile *st, StTensor **order, const char *name, VitError *err) {
    /* Duplicate names: cJSON keeps both entries of a repeated key. */
    for (int i = 0; i < st->n; i++) order[i] = &st->tensors[i];
    qsort(order, (size_t)st->n, sizeof *order, cmp_name);
    for (int i = 1; i < st->n; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            return vit_set_error(err, VIT_ERR_FORMAT, "%s: tensor '%s' appears twice in the header",
                                 name, order[i]->name);
    /* Overlap: sorted by begin, each non-empty tensor must start at or after the
     * furthest end seen so far. */
    qsort(order, (size_t)st->n, sizeof *order, cmp_begin);
    const StTensor *last = NULL;
    for (int i = 0; i < st->n; i++) {
        const StTensor *t = order[i];
        if (t->end == t->begin) continue;
        if (last && t->begin < last->end)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap", name,
                                 last->name, last->begin, last->end, t->name, t->begin, t->end);
        if (!last || t->end > last->end) last = t;
    }
    return VIT_OK;
}

/* --- entry points ---------------------------------------------------------- */

VitStatus st_parse(StFile *st, const uint8_t *file, size_t file_bytes, const char *name,
                   VitError *err) {
    memset(st, 0, sizeof *st);
    cJSON *root = NULL;
    StTensor **order = NULL;
    VitStatus rc = VIT_OK;

    if (file_bytes < 8) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: file is %zu bytes, too short for a safetensors header "
                           "(8-byte length + JSON)",
                           name, file_bytes);
        goto fail;
    }
    uint64_t n_header = 0;
    for (int i = 7; i >= 0; i--) n_header = (n_header << 8) | file[i];
    if (n_header < 2 || n_header > file_bytes - 8) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: header length %llu does not fit in the file (%zu bytes after "
                           "the 8-byte length): truncated or not a safetensors file",
                           name, (unsigned long long)n_header, file_bytes - 8);
        goto fail;
    }
    if (n_header > VIT_MAX_HEADER_BYTES) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: header length %llu exceeds the limit %u", name,
                           (unsigned long long)n_header, VIT_MAX_HEADER_BYTES);
        goto fail;
    }
    const char *json = (const char *)file + 8;
    const char *at = NULL; /* cJSON's error position, without its global */
    root = cJSON_ParseWithLengthOpts(json, (size_t)n_header, &at, 0);
    if (!root) {
        long pos = (at && at >= json && at <= json + n_header) ? (long)(at - json) : -1;
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: header is not valid JSON (error near byte %ld)", name, pos);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: header is JSON but not an object", name);
        goto fail;
    }
    st->data = file + 8 + n_header;
    st->data_bytes = file_bytes - 8 - (size_t)n_header;

    int count = 0;
    for (cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "__metadata__") != 0) count++;
    if (count > VIT_MAX_TENSORS) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: %d tensors exceeds the limit %d", name, count,
                           VIT_MAX_TENSORS);
        goto fail;
    }
    st->tensors = calloc((size_t)(count ? count : 1), sizeof *st->tensors);
    order = calloc((size_t)(count ? count : 1), sizeof *order);
    if (!st->tensors || !order) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for %d tensors", name, count);
        goto fail;
    }

    for (cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        const char *tn = e->string;
        if (!cJSON_IsObject(e)) {
            rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: tensor '%s': entry is not an object", name,
                               tn);
            goto fail;
        }
        StTensor *t = &st->tensors[st->n];
        t->name = strdup(tn);
        if (!t->name) {
            rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", name);
            goto fail;
        }
        st->n++;

        if ((rc = parse_entry(t, e, st->data_bytes, name, err))) goto fail;
    }
    if ((rc = check_layout(st, order, name, err))) goto fail;
    for (int i = 0; i < st->n; i++) st->tensors[i].data = st->data + st->tensors[i].begin;

    free(order);
    cJSON_Delete(root);
    return VIT_OK;

fail:
    free(order);
    cJSON_Delete(root);
    st_free(st);
    return rc;
}

const StTensor *st_find(const StFile *st, const char *name) {
    if (!name) return NULL; /* a role the layout names no tensor for (ld_slot_name) */
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

void st_free(StFile *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->tensors[i].name);
    free(st->tensors);
    free(st->owned);
    memset(st, 0, sizeof *st);
}
