/* pth_pickle.c - the pickle machine of the PyTorch checkpoint reader (pth.h; the format and
 * the limits: pth.c's top comment): values made in blocks and counted against the budget,
 * the stack, the memo, and the opcodes torch.save writes, each run by its step. What the
 * globals, REDUCE and BINPERSID make is pth_objects.c's. */
#include "pth.h"

#include <stdlib.h>
#include <string.h>

/* --- values -------------------------------------------------------------------- */

Pkl pkl_new(const char *fname, size_t file_bytes, VitError *err) {
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

void *pkl_nomem(Pkl *p) {
    vit_set_error(p->err, VIT_ERR_NOMEM, "%s: out of memory reading data.pkl", p->fname);
    return NULL;
}

/* malloc(n), counted (charge). */
void *pkl_alloc(Pkl *p, size_t n) {
    if (!charge(p, n + ALLOC_OVERHEAD)) return NULL;
    void *m = malloc(n ? n : 1);
    return m ? m : pkl_nomem(p);
}

Val *pkl_val(Pkl *p, VKind k) {
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

void pkl_free(Pkl *p) {
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

int pkl_reserve(Pkl *p, Val *c, size_t n_items) {
    if (n_items <= c->cap) return 1;
    /* n_items comes from a container already counted: n_items * 8 cannot overflow */
    if (!charge(p, (n_items - c->cap) * sizeof *c->items + ALLOC_OVERHEAD)) return 0;
    Val **ni = realloc(c->items, n_items * sizeof *ni);
    if (!ni) return pkl_nomem(p) != NULL;
    c->items = ni, c->cap = n_items;
    return 1;
}

int pkl_push_item(Pkl *p, Val *c, Val *x) {
    if (c->n >= c->cap && !pkl_reserve(p, c, c->cap ? 2 * c->cap : 8)) return 0;
    c->items[c->n++] = x;
    return 1;
}

/* Is v the string lit, byte for byte (a NUL inside v is not an end)? */
int pkl_str_is(const Val *v, const char *lit) {
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
    Val *c = pkl_val(p, k);
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

/* --- the unpickler ------------------------------------------------------------------ */

static uint64_t le(const uint8_t *b, int n) {
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--) x = (x << 8) | b[i];
    return x;
}

/* The opcode being run: op at byte `at` of the pickle [buf, buf + n), its arguments from
 * byte i on (a step moves i past what it reads). */
typedef struct {
    const uint8_t *buf;
    size_t n, i, at;
    uint8_t op;
} Op;

/* k bytes of arguments are left, else the pickle is cut short (returns its status). */
#define NEED(k)                                                                                    \
    do {                                                                                           \
        if (o->n - o->i < (size_t)(k)) {                                                           \
            return vit_set_error(p->err, VIT_ERR_FORMAT,                                           \
                                 "%s: data.pkl is cut short at byte %zu (opcode 0x%02x)",          \
                                 p->fname, o->at, o->op);                                          \
        }                                                                                          \
    } while (0)
#define FAIL() return p->err->code

/* MARK, EMPTY_DICT / LIST / TUPLE, NONE, NEWTRUE, NEWFALSE, TUPLE, LIST, DICT, TUPLE1..3:
 * a value made and pushed. */
static VitStatus op_make(Pkl *p, Op *o) {
    const size_t at = o->at;
    const uint8_t op = o->op;
    switch (op) {
    case '(':
        if (!push(p, &p->mark)) FAIL();
        break;
    case '}':
        if (!push(p, pkl_val(p, V_DICT))) FAIL();
        break;
    case ']':
        if (!push(p, pkl_val(p, V_LIST))) FAIL();
        break;
    case ')':
        if (!push(p, pkl_val(p, V_TUPLE))) FAIL();
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
    default: { /* TUPLE1..3 */
        int k = op - 0x84;
        Val *c = pkl_val(p, V_TUPLE);
        if (!c) FAIL();
        Val *it[3];
        for (int j = k - 1; j >= 0; j--)
            if (!(it[j] = pop(p, at))) FAIL();
        for (int j = 0; j < k; j++)
            if (!pkl_push_item(p, c, it[j])) FAIL();
        if (!push(p, c)) FAIL();
        break;
    }
    }
    return VIT_OK;
}

/* SETITEM, SETITEMS, APPENDS, APPEND: a dict or list on the stack filled. */
static VitStatus op_fill(Pkl *p, Op *o) {
    const size_t at = o->at;
    const uint8_t op = o->op;
    Val *v = NULL, *a, *b;
    long m;
    switch (op) {
    case 's': /* SETITEM */
        if (!(b = pop(p, at)) || !(a = pop(p, at)) || !(v = pop(p, at))) FAIL();
        if (v->kind != V_DICT)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: SETITEM on a non-dict at byte %zu", p->fname, at);
        if (!pkl_dict_set(p, v, a, b) || !push(p, v)) FAIL();
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
            if (op == 'u' ? !pkl_dict_set(p, c, p->stack[m + 1 + j], p->stack[m + 2 + j])
                          : !pkl_push_item(p, c, p->stack[m + 1 + j]))
                FAIL();
        p->sp = (size_t)m;
        break;
    }
    default: /* APPEND */
        if (!(a = pop(p, at)) || !(v = pop(p, at))) FAIL();
        if (v->kind != V_LIST)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: APPEND on a non-list at byte %zu", p->fname, at);
        if (!pkl_push_item(p, v, a) || !push(p, v)) FAIL();
        break;
    }
    return VIT_OK;
}

/* BINPUT, LONG_BINPUT, BINGET, LONG_BINGET: the memo. */
static VitStatus op_memo(Pkl *p, Op *o) {
    const uint8_t *buf = o->buf;
    const size_t at = o->at;
    switch (o->op) {
    case 'q':
        NEED(1);
        if (!memo_put(p, buf[o->i], at)) FAIL();
        o->i += 1;
        break;
    case 'r':
        NEED(4);
        if (!memo_put(p, le(buf + o->i, 4), at)) FAIL();
        o->i += 4;
        break;
    case 'h':
        NEED(1);
        if (!push(p, memo_get(p, buf[o->i], at))) FAIL();
        o->i += 1;
        break;
    default: /* 'j' */
        NEED(4);
        if (!push(p, memo_get(p, le(buf + o->i, 4), at))) FAIL();
        o->i += 4;
        break;
    }
    return VIT_OK;
}

/* BININT, BININT1, BININT2, LONG1, BINFLOAT: a number pushed. */
static VitStatus op_number(Pkl *p, Op *o) {
    const uint8_t *buf = o->buf;
    const size_t at = o->at;
    const uint8_t op = o->op;
    Val *v;
    switch (op) {
    case 'J':
    case 'K':
    case 'M': { /* BININT (signed 4), BININT1, BININT2 */
        int k = op == 'J' ? 4 : op == 'K' ? 1 : 2;
        NEED(k);
        if (!(v = pkl_val(p, V_INT))) FAIL();
        v->i =
            op == 'J' ? (int64_t)(int32_t)(uint32_t)le(buf + o->i, 4) : (int64_t)le(buf + o->i, k);
        o->i += (size_t)k;
        if (!push(p, v)) FAIL();
        break;
    }
    case 0x8a: { /* LONG1: n bytes, two's complement little-endian */
        NEED(1);
        int k = buf[o->i++];
        NEED(k);
        if (k > 8)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: integer of %d bytes at byte %zu", p->fname, k, at);
        uint64_t x = k ? le(buf + o->i, k) : 0;
        if (k && k < 8 && (buf[o->i + k - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * k);
        o->i += (size_t)k;
        if (!(v = pkl_val(p, V_INT))) FAIL();
        memcpy(&v->i, &x, sizeof x);
        if (!push(p, v)) FAIL();
        break;
    }
    default: { /* 'G', BINFLOAT: big-endian double */
        NEED(8);
        uint64_t x = 0;
        for (int j = 0; j < 8; j++) x = (x << 8) | buf[o->i + j];
        o->i += 8;
        if (!(v = pkl_val(p, V_FLOAT))) FAIL();
        memcpy(&v->f, &x, sizeof x);
        if (!push(p, v)) FAIL();
        break;
    }
    }
    return VIT_OK;
}

/* BINUNICODE, SHORT_BINUNICODE, BINSTRING, SHORT_BINSTRING, BINBYTES, SHORT_BINBYTES: a
 * string (or bytes) pushed, a copy of the pickle's. */
static VitStatus op_string(Pkl *p, Op *o) {
    const uint8_t op = o->op;
    Val *v;
    int k = (op == 'X' || op == 'T' || op == 'B') ? 4 : 1;
    NEED(k);
    uint64_t len = le(o->buf + o->i, k);
    o->i += (size_t)k;
    NEED(len);
    if (!(v = pkl_val(p, V_STR)) || !(v->s = pkl_alloc(p, (size_t)len + 1))) FAIL();
    memcpy(v->s, o->buf + o->i, (size_t)len);
    v->s[len] = 0;
    v->n = (size_t)len;
    o->i += (size_t)len;
    if (!push(p, v)) FAIL();
    return VIT_OK;
}

/* GLOBAL "module\nname\n", STACK_GLOBAL (module, name strings on the stack): one of the
 * allowed globals pushed, anything else refused (pth_objects.c). */
static VitStatus op_global(Pkl *p, Op *o) {
    const uint8_t *buf = o->buf;
    const size_t n = o->n, i = o->i, at = o->at;
    Val *a, *b;
    if (o->op == 0x93) { /* STACK_GLOBAL */
        if (!(b = pop(p, at)) || !(a = pop(p, at))) FAIL();
        if (a->kind != V_STR || b->kind != V_STR)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: STACK_GLOBAL at byte %zu without two strings",
                                 p->fname, at);
        if (!pkl_global_part_ok(p, "STACK_GLOBAL", "module", a->s, a->n, at) ||
            !pkl_global_part_ok(p, "STACK_GLOBAL", "name", b->s, b->n, at) ||
            !push(p, pkl_global(p, a->s, b->s)))
            FAIL();
        return VIT_OK;
    }
    const uint8_t *nl1 = memchr(buf + i, '\n', n - i);
    const uint8_t *nl2 = nl1 ? memchr(nl1 + 1, '\n', n - (size_t)(nl1 + 1 - buf)) : NULL;
    if (!nl2)
        return vit_set_error(p->err, VIT_ERR_FORMAT,
                             "%s: data.pkl: GLOBAL at byte %zu is cut short", p->fname, at);
    char mod[PKL_MAX_NAME], name[PKL_MAX_NAME];
    size_t mod_n = (size_t)(nl1 - (buf + i)), name_n = (size_t)(nl2 - nl1 - 1);
    if (!pkl_global_part_ok(p, "GLOBAL", "module", (const char *)buf + i, mod_n, at) ||
        !pkl_global_part_ok(p, "GLOBAL", "name", (const char *)nl1 + 1, name_n, at))
        FAIL();
    memcpy(mod, buf + i, mod_n);
    mod[mod_n] = 0;
    memcpy(name, nl1 + 1, name_n);
    name[name_n] = 0;
    o->i = (size_t)(nl2 + 1 - buf);
    if (!push(p, pkl_global(p, mod, name))) FAIL();
    return VIT_OK;
}

/* BINPERSID, REDUCE, NEWOBJ, BUILD: objects made of the globals (pth_objects.c). */
static VitStatus op_object(Pkl *p, Op *o) {
    const size_t at = o->at;
    Val *a, *b;
    switch (o->op) {
    case 'Q': /* BINPERSID */
        if (!(a = pop(p, at)) || !push(p, pkl_persistent_load(p, a, at))) FAIL();
        break;
    case 'R': /* REDUCE */
        if (!(b = pop(p, at)) || !(a = pop(p, at)) || !push(p, pkl_reduce(p, a, b, at))) FAIL();
        break;
    case 0x81: /* NEWOBJ cls args: only an argparse.Namespace (protocol 2's object()) */
        if (!(b = pop(p, at)) || !(a = pop(p, at))) FAIL();
        if (a->kind != V_GLOBAL || a->aux != G_NAMESPACE || b->kind != V_TUPLE)
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: NEWOBJ at byte %zu of something that is not "
                                 "an argparse.Namespace: refused",
                                 p->fname, at);
        if (!push(p, pkl_val(p, V_OPAQUE))) FAIL();
        break;
    default: /* 'b', BUILD: an OrderedDict's _metadata, a tensor's __dict__, a Namespace's
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
    }
    return VIT_OK;
}

/* POP, POP_MARK, DUP. */
static VitStatus op_stack(Pkl *p, Op *o) {
    long m;
    switch (o->op) {
    case '0':
        if (!pop(p, o->at)) FAIL();
        break; /* POP */
    case '1':  /* POP_MARK */
        if ((m = find_mark(p, o->at)) < 0) FAIL();
        p->sp = (size_t)m;
        break;
    default: /* '2', DUP */
        if (p->sp == 0 || !push(p, p->stack[p->sp - 1]))
            return p->sp ? p->err->code
                         : vit_set_error(p->err, VIT_ERR_FORMAT,
                                         "%s: data.pkl: DUP of an empty stack", p->fname);
        break;
    }
    return VIT_OK;
}

/* PROTO's argument skipped (torch.save writes 2). */
static VitStatus op_proto(Pkl *p, Op *o) {
    NEED(1);
    o->i++;
    return VIT_OK;
}

#undef NEED
#undef FAIL

/* Run the pickle [buf, buf + n); the object it returns into *out. Each opcode torch.save
 * writes for a state dict goes to its step; any other is refused. */
VitStatus pkl_unpickle(Pkl *p, const uint8_t *buf, size_t n, Val **out) {
    Op o = {.buf = buf, .n = n};
    while (o.i < n) {
        o.at = o.i;
        o.op = buf[o.i++];
        VitStatus rc;
        switch (o.op) {
        case 0x80: rc = op_proto(p, &o); break; /* PROTO */
        case '.':                               /* STOP */
            if (p->sp != 1 || p->stack[0]->kind == V_MARK)
                return vit_set_error(p->err, VIT_ERR_FORMAT,
                                     "%s: data.pkl ends with %zu values on the stack, expected 1",
                                     p->fname, p->sp);
            *out = p->stack[0];
            return VIT_OK;
        case '(':
        case '}':
        case ']':
        case ')':
        case 'N':
        case 0x88:
        case 0x89:
        case 't':
        case 'l':
        case 'd':
        case 0x85:
        case 0x86:
        case 0x87: rc = op_make(p, &o); break;
        case 's':
        case 'u':
        case 'e':
        case 'a': rc = op_fill(p, &o); break;
        case 'q':
        case 'r':
        case 'h':
        case 'j': rc = op_memo(p, &o); break;
        case 'J':
        case 'K':
        case 'M':
        case 0x8a:
        case 'G': rc = op_number(p, &o); break;
        case 'X':
        case 0x8c:
        case 'T':
        case 'U':
        case 'B':
        case 'C': rc = op_string(p, &o); break;
        case 'c':
        case 0x93: rc = op_global(p, &o); break;
        case 'Q':
        case 'R':
        case 0x81:
        case 'b': rc = op_object(p, &o); break;
        case '0':
        case '1':
        case '2': rc = op_stack(p, &o); break;
        default:
            return vit_set_error(p->err, VIT_ERR_FORMAT,
                                 "%s: data.pkl: opcode 0x%02x at byte %zu is not one torch.save "
                                 "writes for a state dict: refused",
                                 p->fname, o.op, o.at);
        }
        if (rc) return rc;
    }
    return vit_set_error(p->err, VIT_ERR_FORMAT, "%s: data.pkl ends without STOP", p->fname);
}
