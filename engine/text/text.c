/* text.c - CLIP's text tower, and SigLIP's (vit.h "vit_text_load": its names, no mask,
 * the last position pooled, vit_text_scores' sigmoids): vit_text_load reads it from a CLIP
 * checkpoint in Hugging Face's or OpenAI/OpenCLIP's names with vit_load's readers (engine/load/:
 * the mapping or the .pth's storages, every tensor's dtype, shape and values checked by ld_tensor);
 * vit_text_embed runs it on token sequences with vit_forward's own block
 * (engine/passes/block.c) and the causal mask (VitAttMod.parent), the sequences merged
 * into a prefix tree (see "embedding" below).
 *
 * Row-major. Linear weights keep PyTorch's [out, in] layout: out[T, O] = inp[T, I] .
 * w[O, I]^T + b[O] (vit_linear). OpenAI's text_projection [W, E], used as x @ P, is
 * transposed at load into that layout.
 *
 * The published model (OpenAI CLIP, clip/model.py encode_text; Hugging Face
 * CLIPTextTransformer and CLIPModel.get_text_features; open_clip's TextTransformer):
 *   x = token_embedding(text) + positional_embedding
 *   x = transformer(x)            resblocks: x = x + attn(ln_1(x), mask)
 *                                            x = x + mlp(ln_2(x))
 *   x = ln_final(x)
 *   x = x[arange(B), text.argmax(dim=-1)] @ text_projection
 * the mask -inf above the diagonal (build_attention_mask).
 *
 * This file runs the tower and scores; text_load.c reads it. */
#include "load/loader.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- embedding ------------------------------------------------------------------ */

/* With the causal mask a token's row depends on its own prefix only: the tokens
 * [ids[0] .. ids[t]] give row t the same values in every sequence that starts with them.
 * So the sequences are sorted and merged into a prefix tree, each distinct prefix one row
 * (the template of "a photo of a {}." computed once for all the class names), and the
 * rows of a batch run through vit_block as one sequence whose attention mask is the tree
 * (VitAttMod.parent): a row sees itself and its ancestors, exactly the keys it sees in
 * its own sequence, every other key's probability exactly 0. Each sequence ends at its
 * pooled token (its first largest id): what follows cannot change it. */

/* Rows of one batch: about 20 KB of activations a row at W 512; 256 rows make each GEMM
 * tall enough that the weights are read once for many rows, and keep the tree's
 * attention (rows x rows scores, half of them computed) a few percent of the linear
 * layers' work (256 rather than 512: 5% less time on prompts that share little). */
enum { BATCH_ROWS = 256 };

typedef struct {
    const int *ids;
    int need; /* tokens to compute: the pooled position + 1 */
    int idx;  /* the sequence's index in the caller's arrays */
} Seq;

/* Lexicographic order of the computed tokens (a prefix before its extensions). */
static int by_tokens(const void *a, const void *b) {
    const Seq *x = a, *y = b;
    int n = x->need < y->need ? x->need : y->need;
    for (int i = 0; i < n; i++)
        if (x->ids[i] != y->ids[i]) return x->ids[i] < y->ids[i] ? -1 : 1;
    if (x->need != y->need) return x->need < y->need ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Buffers for `rows` tree rows and as many sequences. */
typedef struct {
    float *x, *xn, *qk, *v, *ctx, *hid, *scratch, *pooled, *pooled_n, *emb;
    int *tok, *depth, *parent, *path, *at; /* rows' token, position, parent; a sequence's
                                              rows by depth [ctx]; pooled rows [rows] */
    float *mem;
    int *imem;
} TextBufs;

static int bufs_alloc(TextBufs *b, size_t rows, const VitTextConfig *c, int n_threads) {
    size_t W = (size_t)c->width, F = (size_t)c->mlp_dim, E = (size_t)c->embed_dim,
           ctx = (size_t)c->context, n = 0;
    if (!vit_add_product(&n, rows, 8 * W + F + E) ||
        !vit_add_product(&n, (size_t)n_threads * VIT_ATT_BLOCK, rows))
        return 0;
    if (!(b->mem = malloc(n * sizeof(float))) ||
        !(b->imem = malloc((4 * rows + ctx) * sizeof(int))))
        return 0;
    float *p = b->mem;
    b->x = p, p += rows * W;
    b->xn = p, p += rows * W;
    b->qk = p, p += rows * 2 * W;
    b->v = p, p += rows * W;
    b->ctx = p, p += rows * W;
    b->hid = p, p += rows * F;
    b->scratch = p, p += (size_t)n_threads * VIT_ATT_BLOCK * rows;
    b->pooled = p, p += rows * W;
    b->pooled_n = p, p += rows * W;
    b->emb = p;
    int *q = b->imem;
    b->tok = q, q += rows;
    b->depth = q, q += rows;
    b->parent = q, q += rows;
    b->at = q, q += rows;
    b->path = q;
    return 1;
}

/* The tree of sequences seq[0 .. n) (sorted): rows [T] in depth-first order into bf
 * (token, position, parent), each sequence's pooled row into bf->at. Takes sequences
 * while their new rows fit `rows` (at least one); returns how many it took, T in *T. */
static int build_tree(TextBufs *bf, const Seq *seq, int n, int rows, int *T) {
    int t = 0, k = 0;
    for (; k < n && k < rows; k++) {
        int lcp = 0; /* shared with the sequence before (sorted: with any earlier one) */
        if (k > 0)
            while (lcp < seq[k].need && lcp < seq[k - 1].need &&
                   seq[k].ids[lcp] == seq[k - 1].ids[lcp])
                lcp++;
        if (k > 0 && t + seq[k].need - lcp > rows) break;
        for (int d = lcp; d < seq[k].need; d++, t++) {
            bf->tok[t] = seq[k].ids[d], bf->depth[t] = d;
            bf->parent[t] = d ? bf->path[d - 1] : -1;
            bf->path[d] = t;
        }
        bf->at[k] = bf->path[seq[k].need - 1];
    }
    *T = t;
    return k;
}

/* SigLIP's batch: as many whole sequences of ctx rows as fit in `rows` (at least one),
 * stacked; returns how many, their T rows in *T. */
static int stack_rows(TextBufs *bf, const Seq *seq, int n, int rows, int ctx, int *T) {
    int k = rows / ctx < 1 ? 1 : rows / ctx;
    if (k > n) k = n;
    for (int i = 0; i < k; i++) {
        for (int r = 0; r < ctx; r++)
            bf->tok[i * ctx + r] = seq[i].ids[r], bf->depth[i * ctx + r] = r;
        bf->at[i] = i * ctx + ctx - 1;
    }
    *T = k * ctx;
    return k;
}

/* One batch: the tree's T rows through the tower, the pooled rows' embeddings into out
 * (row seq[i].idx). */
static void embed_batch(float *out, const VitText *t, VitPool *pool, TextBufs *bf, const Seq *seq,
                        int n, int T) {
    const VitTextConfig *tc = &t->cfg;
    size_t W = (size_t)tc->width, E = (size_t)tc->embed_dim;
    /* OpenAI: x = self.token_embedding(text) + self.positional_embedding */
    for (int r = 0; r < T; r++) {
        const float *te = t->token_embed + (size_t)bf->tok[r] * W,
                    *pe = t->pos_embed + (size_t)bf->depth[r] * W;
        float *x = bf->x + (size_t)r * W;
        for (size_t d = 0; d < W; d++) x[d] = te[d] + pe[d];
    }
    /* the blocks: vit_forward's, the T rows one sequence under the tree's causal mask, the
     * stream in place */
    VitConfig c = {.n_tokens = T,
                   .dim = tc->width,
                   .n_heads = tc->n_heads,
                   .head_dim = tc->width / tc->n_heads,
                   .mlp_dim = tc->mlp_dim,
                   .n_layers = tc->n_layers,
                   .ln_eps = tc->ln_eps,
                   .mlp_act = tc->act};
    /* SigLIP: n sequences of ctx rows each, stacked, no mask */
    int last = tc->pool == VIT_TEXT_POOL_LAST;
    if (last) c.n_tokens = tc->context;
    VitAttMod causal = {.parent = bf->parent};
    VitBlockIO io = {.n = last ? n : 1,
                     .rows = last ? tc->context : T,
                     .x = bf->x,
                     .res = bf->x,
                     .xn1 = bf->xn,
                     .qk = bf->qk,
                     .v = bf->v,
                     .scratch = bf->scratch,
                     .ctx = bf->ctx,
                     .tmp = bf->xn,
                     .xm = bf->x,
                     .xn2 = bf->xn,
                     .hid = bf->hid,
                     .out = bf->x,
                     .mod = last ? NULL : &causal};
    for (int l = 0; l < tc->n_layers; l++) vit_block(pool, &t->blocks[l], &c, &io);
    /* x = ln_final(x)[arange(B), text.argmax(-1)] @ text_projection: LayerNorm is per row,
     * so the pooled rows alone (SigLIP: self.head(final_layer_norm(x)[:, -1, :])) */
    for (int i = 0; i < n; i++)
        memcpy(bf->pooled + (size_t)i * W, bf->x + (size_t)bf->at[i] * W, W * sizeof(float));
    vit_layernorm(pool, bf->pooled_n, bf->pooled, t->norm_w, t->norm_b, n, tc->width, tc->ln_eps);
    vit_linear(pool, (VitLinear){.out = bf->emb,
                                 .ld_out = tc->embed_dim,
                                 .inp = bf->pooled_n,
                                 .w = t->proj_w,
                                 .b = t->proj_b,
                                 .T = n,
                                 .n_in = tc->width,
                                 .n_out = tc->embed_dim});
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)seq[i].idx * E, bf->emb + (size_t)i * E, E * sizeof(float));
}

VitStatus vit_text_embed(float *out, const VitText *t, const int *const *ids, const int *lens,
                         int n, int n_threads, VitError *err) {
    if (!out || !t || !ids || !lens || n < 0 || n_threads < 0 || n_threads > VIT_MAX_THREADS)
        return vit_set_error(err, VIT_ERR_ARG, "vit_text_embed: %s",
                             n < 0 ? "a negative number of sequences"
                             : n_threads < 0 || n_threads > VIT_MAX_THREADS
                                 ? "threads outside 0 .. VIT_MAX_THREADS"
                                 : "a NULL argument");
    const VitTextConfig *c = &t->cfg;
    const char *name = vit_basename(t->path);
    if (!t->blocks || !t->proj_w)
        return vit_set_error(err, VIT_ERR_ARG, "vit_text_embed: no text tower loaded");
    if (c->n_heads < 1 || c->n_heads > c->width || c->width % c->n_heads)
        return vit_set_error(err, VIT_ERR_ARG, "%s: %d heads do not divide the width %d", name,
                             c->n_heads, c->width);
    if (n == 0) return VIT_OK;
    int last = c->pool == VIT_TEXT_POOL_LAST;
    Seq *seq = malloc((size_t)n * sizeof *seq);
    if (!seq) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", name);
    /* each sequence's pooled position: OpenAI's text.argmax(dim=-1), the first largest id */
    for (int i = 0; i < n; i++) {
        if (!ids[i] || lens[i] < 1 || lens[i] > c->context) {
            free(seq);
            return vit_set_error(err, VIT_ERR_ARG,
                                 ids[i] ? "%s: sequence %d has %d tokens, expected 1 .. %d"
                                        : "%s: sequence %d is NULL",
                                 name, i, lens[i], c->context);
        }
        if (last && lens[i] != c->context) {
            free(seq);
            return vit_set_error(err, VIT_ERR_ARG,
                                 "%s: sequence %d has %d tokens: SigLIP's text tower reads "
                                 "exactly %d, padded with </s> (vit_tokenize pads them): it "
                                 "pools the last position",
                                 name, i, lens[i], c->context);
        }
        int at = 0;
        for (int r = 0; r < lens[i]; r++) {
            if (ids[i][r] < 0 || ids[i][r] >= c->vocab_size) {
                free(seq);
                return vit_set_error(err, VIT_ERR_ARG,
                                     "%s: sequence %d, token %d: id %d outside the vocabulary "
                                     "[0, %d)",
                                     name, i, r, ids[i][r], c->vocab_size);
            }
            if (ids[i][r] > ids[i][at]) at = r;
        }
        seq[i] = (Seq){ids[i], last ? c->context : at + 1, i};
    }
    qsort(seq, (size_t)n, sizeof *seq, by_tokens);
    if (!n_threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc < 1 ? 1 : nc > VIT_MAX_THREADS ? VIT_MAX_THREADS : (int)nc;
    }
    int rows = c->context > BATCH_ROWS ? c->context : BATCH_ROWS;
    TextBufs bf = {0};
    VitPool *pool = NULL;
    VitStatus rc = VIT_OK;
    if (!bufs_alloc(&bf, (size_t)rows, c, n_threads) || !(pool = vit_pool_new(n_threads))) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for %d text sequences", name, n);
        goto done;
    }
    for (int i0 = 0, T = 0; i0 < n;) {
        int k = last ? stack_rows(&bf, seq + i0, n - i0, rows, c->context, &T)
                     : build_tree(&bf, seq + i0, n - i0, rows, &T);
        embed_batch(out, t, pool, &bf, seq + i0, k, T);
        i0 += k;
    }
done:
    vit_pool_free(pool);
    free(bf.mem);
    free(bf.imem);
    free(seq);
    return rc;
}

/* --- zero-shot scores ---------------------------------------------------------------- */

/* |v| of v [E] in double; 0 when v is zero or not finite (refused by the caller). */
static double norm_of(const float *v, int E) {
    double n2 = 0.0;
    for (int j = 0; j < E; j++) n2 += (double)v[j] * v[j];
    return n2 > 0.0 && isfinite(n2) ? sqrt(n2) : 0.0;
}

VitStatus vit_text_scores(float *logits, float *probs, const float *img, int n, const float *txt,
                          int C, const VitText *t, VitError *err) {
    if (!t || !img || !txt || n < 1 || C < 1 || (!logits && !probs))
        return vit_set_error(err, VIT_ERR_ARG, "vit_text_scores: %s",
                             n < 1 || C < 1 ? "no images or no labels" : "a NULL argument");
    const char *name = vit_basename(t->path);
    if (!(t->logit_scale > 0.0f))
        return vit_set_error(err, VIT_ERR_ARG, "%s: no logit_scale in the checkpoint", name);
    int E = t->cfg.embed_dim;
    for (int c = 0; c < C; c++)
        if (norm_of(txt + (size_t)c * E, E) == 0.0)
            return vit_set_error(err, VIT_ERR_ARG, "%s: text embedding %d has no direction", name,
                                 c);
    for (int i = 0; i < n; i++) {
        double ni = norm_of(img + (size_t)i * E, E);
        if (ni == 0.0)
            return vit_set_error(err, VIT_ERR_ARG, "%s: image embedding %d has no direction", name,
                                 i);
        /* HF SiglipModel.forward: logits_per_text = t_hat . i_hat^T * logit_scale.exp()
         * + logit_bias; CLIPModel's the same without the bias */
        double mx = -INFINITY, *z = NULL, zbuf[64];
        z = C <= 64 ? zbuf : malloc((size_t)C * sizeof *z);
        if (!z) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", name);
        for (int c = 0; c < C; c++) {
            const float *tc = txt + (size_t)c * E, *ic = img + (size_t)i * E;
            double dot = 0.0;
            for (int j = 0; j < E; j++) dot += (double)tc[j] * ic[j];
            z[c] = t->logit_scale * dot / (ni * norm_of(tc, E)) + t->logit_bias;
            if (z[c] > mx) mx = z[c];
            if (logits) logits[(size_t)i * C + c] = (float)z[c];
        }
        if (probs) {
            double sum = 0.0;
            for (int c = 0; c < C; c++) sum += exp(z[c] - mx);
            for (int c = 0; c < C; c++)
                probs[(size_t)i * C + c] =
                    (float)(t->sigmoid ? 1.0 / (1.0 + exp(-z[c])) : exp(z[c] - mx) / sum);
        }
        if (z != zbuf) free(z);
    }
    return VIT_OK;
}
