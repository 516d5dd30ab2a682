/* vit_dump.c - run the engine once and write what it computed as .npy files,
 * for test_parity.py to compare with a PyTorch reference.
 *
 *   vit_dump --model M.safetensors|M.pth [--heads N] [--config config.json] [--layout L.json]
 *            [--size HxW] [--whole] [--att keep|recompute] [--threads K]
 *            [--class C [--discard R]] [--tokens] [--ignore-orientation]
 *            (--image PHOTO | --input RAW) --out DIR
 *
 * RAW is a [3, Sh, Sw] float32 file in host byte order: it tests the forward
 * pass apart from preprocessing. --size and --whole are VitLoadOptions'
 * image_h/image_w and whole_image. DIR (created if missing) receives
 *   input.npy   [3, Sh, Sw] f4  normalised pixels the model saw
 *   rgb.npy     [Sh, Sw, 3] u1  the resized, centre-cropped picture (--image only)
 *   image.npy   [h, w, 3] u1    the decoded photo, turned upright unless
 *                               --ignore-orientation (VitImageOptions) (--image only)
 *   att.npy     [L, H, T, T] f4 attention probabilities of every layer and head
 *   pos.npy     [Npos + N, D] f4 the position embedding the forward pass adds (if any)
 *   rope.npy    [N, Dh] f4      the rotary table (VitWeights.rope: cosines, sines), if any
 *   logits.npy  [C] f4, probs.npy [C] f4   (only when the model has a head, C > 0)
 *   logits_dist.npy [C] f4      the distillation head's own logits (if any)
 *   config.json what the engine inferred: Sh, Sw, P, gh, gw, prefix tokens, D,
 *               H, L, F, C, eps, the crop rectangle, the top-5 class indices and
 *               VitConfig.left_out.
 * --att recompute runs with the attention recomputed from queries and keys: att.npy
 * and grad_att.npy are then not written (the maps are, and must be the same).
 * --class C (C >= 0 a class, -1 the top-1) runs vit_backward for logit C and writes
 *   grad_att.npy    [L, H, T, T] f4 dy_c/dA_l (attention kept)
 *   grad_tokens.npy [L, T, D] f4    dy_c/dz_l, z_l block l's output
 *   grad_input.npy  [3, Sh, Sw] f4  dy_c/d input;  lrp_input.npy the same, AttnLRP's
 *   expl_NAME.npy   each vit_explain map: [gh, gw] or [Sh, Sw] (NAME: chefer,
 *                   grad_rollout (with --discard R), gradcam, legrad, attnlrp, grad_input)
 * and "target" in config.json.
 * --tokens runs with VitRunOptions.all_tokens and writes the token views
 * (vit.h, "What the tokens hold"), every layer l = 0 .. L-1:
 *   tokens.npy     [L + 1, T, D] f4 the residual stream (VitRun.tokens)
 *   features.npy   [L, T, D] f4     vit_features
 *   norms.npy      [L, T] f4        vit_token_norms
 *   similarity.npy [L, 3, N] f4     vit_patch_similarity for the queries 0 (CLS), Np (the
 *                                   first patch) and T - 1 (the last)
 *   tokenrank.npy  [L, H + 3, T] f4 vit_tokenrank of each head, then mean, max, min fusion
 *   high_norm.npy  [L, T, 2] i4     vit_high_norm_tokens(k = 3, no absolute threshold):
 *                                   per layer (token, first layer) rows, the rest -1
 *   lens.npy       [L, C] f4        vit_logit_lens of the CLS token (with a head)
 *   lens_map.npy   [L, N] f4        vit_logit_lens_map of the top-1 class (with a head)
 * --lesson L,H,T,PATCH writes the lesson's numbers (vit.h, "The lesson"), 0-based:
 *   lesson_patch_pixels [3, P, P], lesson_patch_embedding [D]   vit_lesson_patch(PATCH)
 *   lesson_filters [k, 3, P, P], lesson_filters_var [k]        vit_lesson_filters, k <= 28
 *   lesson_pos_similarity [N, gh, gw]                           vit_lesson_pos_similarity
 *   block L, head H, query token T (vit_lesson_block, vit_lesson_select): lesson_ln_in,
 *   lesson_ln_out [D], lesson_query [Dh], lesson_keys, lesson_values [T, Dh],
 *   lesson_scores, lesson_probs [T], lesson_head_out [Dh], lesson_concat [A], lesson_proj,
 *   lesson_resid1, lesson_mlp, lesson_out [D], lesson_hidden [F], lesson_scalars [6]
 *   (ln mean, ln std, |x|, |xm|, |out|, GELU share); lesson_map [N] and lesson_prefix
 *   [Np] (vit_map_attention, vit_prefix_share of the same row); lesson_block_in [T, D]
 *   the block's input; lesson_stream [L + 1, D]
 *   the run's tokens[.][T]; lesson_cls_norm [D] (vit_lesson_head, with a head); a rotary
 *   model: lesson_query0, lesson_key0 [Dh], lesson_angles [Dh/2], lesson_rope_scores
 *   [gh, gw] (VitLesson's RoPE view of the token); a MAP head (SigLIP): vit_lesson_probe's
 *   lesson_probe_att [H, N], lesson_probe_query, _weighted, _attended, _mlp, _embedding [D].
 * Interventions (vit.h, VitRun.intervention), 0-based:
 *   --ablate L:H[,L:H...]  heads ablated     --drop P[,P...]  patches dropped
 *   --fill P[,P...]        patches filled    --pos shuffle:SEED | zero
 *   --temp L:TAU           attention temperature of layer L
 * then also written: pos_perm.npy [N] i4 (shuffle), cls_att.npy [L, H, N] f4 (every
 * head's CLS row over the patches through vit_map_attention: with --att recompute the
 * maps' recomputed attention), batch_logits.npy [3, C] f4 (vit_forward_batch on three
 * copies of the input, VitBatch.intervention set; with a head).
 * --importance C:B (C a class, -1 the top-1; B the batch's max_batch) runs
 * vit_head_importance and vit_head_pruning (with the interventions above, if any):
 *   importance.npy [L, H] f4, prune.npy [L*H + 1] f4, order.npy [L*H] i4, and
 *   "importance_base" (p of the class) and "importance_class" in importance.json.
 * Scores other than one logit (vit.h, VitScore), instead of --class C (the same files):
 *   --contrast A,B   logit_A - logit_B (vit_score_contrast)
 *   --cosine RAW     cos(e, ref), ref the raw f32 embedding [E] in RAW held constant
 *                    (vit_score_cosine); writes embedding.npy [E] = vit_embedding
 *   --cosine-dot RAW the negative control: the gradient of the dot product e . ref instead
 *                    (a score this file defines: what the cosine's comparison must catch)
 * CLIP (vit.h, "CLIP"): --text-head RAW:C sets CLIP's text head (vit_set_text_head) from
 * RAW, float32 [C, E] text embeddings in host byte order, with the logit scale of
 * --logit-scale S (default: the checkpoint's, cfg.logit_scale); then --class explains
 * phrase C. --then-text-head RAW2 (the same C): after the forward pass, a second text head
 * from RAW2 and vit_text_logits (no new forward pass); what follows is the second head's.
 * --logit-bias B (SigLIP): the text head's scores are sigmoid(s cos + B) each
 * (vit_set_text_sigmoid), after --text-head and --then-text-head.
 * A model pooled by attention (SigLIP's MAP head) also writes
 *   probe_att.npy [H, N] f4 VitRun.probe_att, the probe's attention per head
 * A model with an image projection also writes
 *   embed.npy [E] f4 vit_image_embed (not normalised)
 * and config.json has "norm_pre", "embed_dim", "logit_scale", "clip", "mlp_act", "rope",
 * "rope_theta", "mlp_gated".
 * Errors: a message on stderr, exit 1 (2 for a usage error). */
#include "vit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- messages -------------------------------------------------------------- */

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vit_dump: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int usage(void) {
    fputs("usage: vit_dump --model M.safetensors [--heads N] [--config config.json]\n"
          "                [--size HxW] [--whole] [--att keep|recompute] [--threads K]\n"
          "                [--class C [--discard R]] [--tokens] [--ignore-orientation]\n"
          "                [--lesson LAYER,HEAD,TOKEN,PATCH] [--text-head RAW:C]\n"
          "                [--logit-scale S] [--logit-bias B] [--then-text-head RAW2]\n"
          "                (--image PHOTO | --input RAW_F32) --out DIR\n",
          stderr);
    return 2;
}

/* --- .npy writing ---------------------------------------------------------- */

/* NPY format 1.0 (numpy/lib/format.py): "\x93NUMPY", version 1.0, header length
 * as little-endian u16, a Python dict literal padded with spaces so that the
 * data starts on a 64-byte boundary and ending in '\n', then the data in C
 * order. descr names the byte order, so the host's is written as is. */
static int npy_write(const char *dir, const char *name, const char *descr, const void *data,
                     size_t elem_bytes, const size_t *shape, int ndim) {
    char path[1200], dims[128] = "", dict[256];
    size_t n = 1, k = 0;
    for (int i = 0; i < ndim; i++) {
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%zu%s", shape[i],
                              ndim == 1      ? ","
                              : i + 1 < ndim ? ", "
                                             : "");
        n *= shape[i];
    }
    int len = snprintf(dict, sizeof dict,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
    size_t pad = (64 - (10 + (size_t)len + 1) % 64) % 64, hlen = (size_t)len + pad + 1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return fail("%s: cannot create: %s", path, strerror(errno));
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(hlen & 0xff), f);
    fputc((int)(hlen >> 8), f);
    fputs(dict, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, elem_bytes, n, f);
    if (ferror(f) | fclose(f)) return fail("%s: write failed", path);
    return 0;
}

/* '<f4' or '>f4': float32 in this machine's byte order. */
static const char *f4_descr(void) {
    const uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first ? "<f4" : ">f4";
}

static int npy_f32(const char *dir, const char *name, const float *data, const size_t *shape,
                   int ndim) {
    return npy_write(dir, name, f4_descr(), data, sizeof(float), shape, ndim);
}

/* --- inputs and the config ------------------------------------------------- */

/* Read exactly n floats from a raw file. */
static int read_raw(float *out, size_t n, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail("%s: cannot open: %s", path, strerror(errno));
    size_t got = fread(out, sizeof(float), n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra)
        return fail("%s: raw input has %s bytes, expected %zu (float32 [3, S, S])", path,
                    extra ? "more" : "fewer", n * sizeof(float));
    return 0;
}

static int write_config(const char *dir, const VitRun *run, const Vit *vit, int target) {
    const VitConfig *c = &vit->cfg;
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return fail("%s: cannot create: %s", path, strerror(errno));
    fprintf(f,
            "{\"name\": \"%s\", \"naming\": \"%s\", \"image_h\": %d, \"image_w\": %d, "
            "\"patch_size\": %d, \"grid_h\": %d, \"grid_w\": %d,\n \"n_patches\": %d, "
            "\"n_prefix\": %d, \"has_dist_token\": %d, \"n_registers\": %d, \"n_tokens\": %d, "
            "\"pos_grid_h\": %d, \"pos_grid_w\": %d, \"pos_prefix\": %d,\n \"dim\": %d, "
            "\"n_heads\": %d, \"head_dim\": %d, \"mlp_dim\": %d, \"n_layers\": %d, "
            "\"n_classes\": %d, \"ln_eps\": %.9g, \"crop_mode\": %d, \"crop_pct\": %.9g,\n"
            " \"mean\": [%.9g, %.9g, %.9g], \"std\": [%.9g, %.9g, %.9g],\n"
            " \"layout\": \"%s\", \"att_scale\": %.9g, \"head_tanh\": %d,\n"
            " \"crop\": [%d, %d, %d, %d], \"top5\": [",
            c->name, c->naming == VIT_NAMES_HF ? "hf" : "timm", c->image_h, c->image_w,
            c->patch_size, c->grid_h, c->grid_w, c->n_patches, c->n_prefix, c->has_dist_token,
            c->n_registers, c->n_tokens, c->pos_grid_h, c->pos_grid_w, vit->w.pos_prefix, c->dim,
            c->n_heads, c->head_dim, c->mlp_dim, c->n_layers, c->n_classes, c->ln_eps,
            (int)c->crop_mode, c->crop_pct, c->mean[0], c->mean[1], c->mean[2], c->std[0],
            c->std[1], c->std[2], c->layout, c->att_scale, c->head_tanh, run->crop_x, run->crop_y,
            run->crop_w, run->crop_h);
    int top[5], k = c->n_classes < 5 ? c->n_classes : 5;
    if (k) vit_top_k(top, run->probs, c->n_classes, k);
    for (int i = 0; i < k; i++) fprintf(f, "%s%d", i ? ", " : "", top[i]);
    fprintf(f,
            "], \"target\": %d,\n \"norm_pre\": %d, \"embed_dim\": %d, \"logit_scale\": %.9g, "
            "\"clip\": %d, \"mlp_act\": %d, \"head_pool\": %d,\n \"rope\": %d, "
            "\"rope_theta\": %.9g, \"mlp_gated\": %d, \"left_out\": \"",
            target, c->norm_pre, c->embed_dim, c->logit_scale, c->clip, (int)c->mlp_act,
            (int)c->head_pool, (int)c->rope, c->rope_theta, c->mlp_gated);
    for (const char *p = c->left_out; *p; p++) /* escaped by the engine: no control bytes */
        fprintf(f, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
    fprintf(f, "\", \"default_preprocess\": %d, \"labels_assumed\": %d, \"labels\": [",
            c->default_preprocess, c->labels_assumed);
    /* the class names the engine attached (config.json's, or a layout's): first and last */
    for (int i = 0; vit->labels && i < 2; i++) {
        fputs(i ? ", \"" : "\"", f);
        for (const char *p = vit->labels[i ? c->n_classes - 1 : 0]; *p; p++)
            fprintf(f, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
        fputc('"', f);
    }
    fputs("]}\n", f);
    if (ferror(f) | fclose(f)) return fail("%s: write failed", path);
    return 0;
}

/* --- the token views (--tokens) ------------------------------------------------ */

/* 0 written, 1 a file error (reported), -1 an engine error (in *err). */
static int write_tokens(const char *out, const VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    size_t L = (size_t)c->n_layers, H = (size_t)c->n_heads, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, N = (size_t)c->n_patches, C = (size_t)c->n_classes;
    size_t n = L * T * D + L * T + L * 3 * N + L * (H + 3) * T + L * C + L * N;
    float *buf = malloc(n * sizeof(float));
    int32_t *hn = malloc(L * T * 2 * sizeof(int32_t));
    int *idx = malloc(2 * T * sizeof(int));
    int rc = 1;
    if (!buf || !hn || !idx) {
        fail("out of memory");
        goto done;
    }
    float *feat = buf, *norms = feat + L * T * D, *sim = norms + L * T, *tr = sim + L * 3 * N,
          *lens = tr + L * (H + 3) * T, *lmap = lens + L * C;
    int queries[3] = {0, c->n_prefix, c->n_tokens - 1}, top = 0;
    if (C) vit_top_k(&top, run->probs, c->n_classes, 1);
    rc = -1;
    for (int l = 0; l < (int)L; l++) {
        if (vit_features(feat + l * T * D, run, vit, l, err) ||
            vit_token_norms(norms + l * T, run, l, err))
            goto done;
        for (int q = 0; q < 3; q++)
            if (vit_patch_similarity(sim + (l * 3 + q) * N, run, vit, l, queries[q], err))
                goto done;
        for (int k = 0; k < (int)H + 3; k++)
            if (vit_tokenrank(tr + (l * (H + 3) + k) * T, run, l, k < (int)H ? k : -1,
                              k < (int)H ? VIT_FUSE_MEAN : (VitFusion)(k - H), err))
                goto done;
        int m = vit_high_norm_tokens(idx, idx + T, NULL, run, l, 3.0f, 0.0f, err);
        if (m < 0) goto done;
        for (int t = 0; t < (int)T; t++) {
            hn[(l * T + t) * 2] = t < m ? idx[t] : -1;
            hn[(l * T + t) * 2 + 1] = t < m ? idx[T + t] : -1;
        }
        if (C && (vit_logit_lens(lens + l * C, run, vit, l, 0, err) ||
                  vit_logit_lens_map(lmap + l * N, run, vit, l, top, err)))
            goto done;
    }
    rc = 1;
    const size_t s_tok[3] = {L + 1, T, D}, s_feat[3] = {L, T, D}, s_norm[2] = {L, T},
                 s_sim[3] = {L, 3, N}, s_tr[3] = {L, H + 3, T}, s_hn[3] = {L, T, 2},
                 s_lens[2] = {L, C}, s_lmap[2] = {L, N};
    const uint16_t one = 1;
    uint8_t little;
    memcpy(&little, &one, 1);
    if (npy_f32(out, "tokens.npy", run->tokens, s_tok, 3) ||
        npy_f32(out, "features.npy", feat, s_feat, 3) ||
        npy_f32(out, "norms.npy", norms, s_norm, 2) ||
        npy_f32(out, "similarity.npy", sim, s_sim, 3) ||
        npy_f32(out, "tokenrank.npy", tr, s_tr, 3) ||
        npy_write(out, "high_norm.npy", little ? "<i4" : ">i4", hn, sizeof(int32_t), s_hn, 3) ||
        (C && (npy_f32(out, "lens.npy", lens, s_lens, 2) ||
               npy_f32(out, "lens_map.npy", lmap, s_lmap, 2))))
        goto done;
    rc = 0;
done:
    free(buf), free(hn), free(idx);
    return rc;
}

/* --- the lesson's numbers (--lesson L,H,T,PATCH) ------------------------------------ */

/* 0 written, 1 a file error (reported), -1 an engine error (in *err). */
static int write_lesson(const char *out, const VitRun *run, const Vit *vit, int layer, int head,
                        int token, int patch, VitError *err) {
    const VitConfig *c = &vit->cfg;
    size_t T = (size_t)c->n_tokens, D = (size_t)c->dim, N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, F = (size_t)c->mlp_dim, Dh = (size_t)c->head_dim,
           Np = (size_t)c->n_prefix, L = (size_t)c->n_layers, K = 3 * P * P, NF = 28,
           A = (size_t)c->n_heads * Dh; /* the attention's width: ctx [T, A] */
    VitLesson ls = {0};
    VitLessonProbe pr = {0};
    float *buf = malloc((K + D + NF * K + NF + N * N + 2 * N + Np + D + 8) * sizeof(float));
    int rc = -1;
    if (!buf) {
        fail("out of memory");
        return 1;
    }
    float *pix = buf, *emb = pix + K, *filt = emb + D, *fvar = filt + NF * K, *sim = fvar + NF,
          *map = sim + N * N, *pre = map + N, *cls = pre + Np, *sc = cls + D;
    if (vit_lesson_patch(pix, emb, run, vit, patch, err)) goto done;
    int nf = vit_lesson_filters(filt, fvar, vit, (int)NF, err);
    if (nf < 0) goto done;
    vit_lesson_pos_similarity(sim, vit);
    if (vit_lesson_init(&ls, vit, err) || vit_lesson_block(&ls, run, vit, layer, err) ||
        vit_lesson_select(&ls, run, head, token, err) ||
        vit_map_attention(map, run, layer, head, token, err) ||
        vit_prefix_share(pre, run, layer, head, VIT_FUSE_MEAN, 0, 0.0f, token, err))
        goto done;
    int has_head = c->n_classes > 0;
    if (has_head && vit_lesson_head(cls, run, vit, err)) goto done;
    int has_probe = c->head_pool == VIT_POOL_MAP;
    if (has_probe && vit_lesson_probe(&pr, run, vit, err)) goto done;
    rc = 1;
    size_t t = (size_t)token;
    sc[0] = ls.ln_mean, sc[1] = ls.ln_std, sc[2] = ls.norm_in, sc[3] = ls.norm_mid,
    sc[4] = ls.norm_out, sc[5] = ls.gelu_share;
    const size_t s_pix[3] = {3, P, P}, s_d[1] = {D}, s_filt[4] = {(size_t)nf, 3, P, P},
                 s_nf[1] = {(size_t)nf}, s_sim[3] = {N, (size_t)c->grid_h, (size_t)c->grid_w},
                 s_dh[1] = {Dh}, s_tdh[2] = {T, Dh}, s_t[1] = {T}, s_n[1] = {N}, s_np[1] = {Np},
                 s_f[1] = {F}, s_sc[1] = {6}, s_tok[2] = {L + 1, D}, s_td[2] = {T, D};
    /* the token's rows of the residual stream the forward pass kept, for comparison */
    float *stream = malloc((L + 1) * D * sizeof(float));
    if (!stream) {
        fail("out of memory");
        goto done;
    }
    for (size_t l = 0; l <= L; l++)
        memcpy(stream + l * D, run->tokens + (l * T + t) * D, D * sizeof(float));
    int bad = npy_f32(out, "lesson_patch_pixels.npy", pix, s_pix, 3) ||
              npy_f32(out, "lesson_patch_embedding.npy", emb, s_d, 1) ||
              npy_f32(out, "lesson_filters.npy", filt, s_filt, 4) ||
              npy_f32(out, "lesson_filters_var.npy", fvar, s_nf, 1) ||
              npy_f32(out, "lesson_pos_similarity.npy", sim, s_sim, 3) ||
              npy_f32(out, "lesson_block_in.npy", ls.x, s_td, 2) ||
              npy_f32(out, "lesson_ln_in.npy", ls.x + t * D, s_d, 1) ||
              npy_f32(out, "lesson_ln_out.npy", ls.xn1 + t * D, s_d, 1) ||
              npy_f32(out, "lesson_query.npy", ls.query, s_dh, 1) ||
              npy_f32(out, "lesson_keys.npy", ls.keys, s_tdh, 2) ||
              npy_f32(out, "lesson_values.npy", ls.values, s_tdh, 2) ||
              npy_f32(out, "lesson_scores.npy", ls.scores, s_t, 1) ||
              npy_f32(out, "lesson_probs.npy", ls.probs, s_t, 1) ||
              npy_f32(out, "lesson_map.npy", map, s_n, 1) ||
              npy_f32(out, "lesson_prefix.npy", pre, s_np, 1) ||
              npy_f32(out, "lesson_head_out.npy", ls.ctx + t * A + (size_t)head * Dh, s_dh, 1) ||
              npy_f32(out, "lesson_concat.npy", ls.ctx + t * A, (size_t[]){A}, 1) ||
              npy_f32(out, "lesson_proj.npy", ls.proj + t * D, s_d, 1) ||
              npy_f32(out, "lesson_resid1.npy", ls.xm + t * D, s_d, 1) ||
              npy_f32(out, "lesson_hidden.npy", ls.hid + t * F, s_f, 1) ||
              npy_f32(out, "lesson_mlp.npy", ls.mlp + t * D, s_d, 1) ||
              npy_f32(out, "lesson_out.npy", ls.out + t * D, s_d, 1) ||
              npy_f32(out, "lesson_scalars.npy", sc, s_sc, 1) ||
              npy_f32(out, "lesson_stream.npy", stream, s_tok, 2) ||
              (has_head && npy_f32(out, "lesson_cls_norm.npy", cls, s_d, 1)) ||
              (c->rope && (npy_f32(out, "lesson_query0.npy", ls.query0, s_dh, 1) ||
                           npy_f32(out, "lesson_key0.npy", ls.key0, s_dh, 1) ||
                           npy_f32(out, "lesson_angles.npy", ls.angles, (size_t[]){Dh / 2}, 1) ||
                           npy_f32(out, "lesson_rope_scores.npy", ls.rope_scores,
                                   (size_t[]){(size_t)c->grid_h, (size_t)c->grid_w}, 2))) ||
              (has_probe && (npy_f32(out, "lesson_probe_att.npy", pr.att,
                                     (size_t[]){(size_t)c->n_heads, N}, 2) ||
                             npy_f32(out, "lesson_probe_query.npy", pr.query, s_d, 1) ||
                             npy_f32(out, "lesson_probe_weighted.npy", pr.weighted, s_d, 1) ||
                             npy_f32(out, "lesson_probe_attended.npy", pr.attended, s_d, 1) ||
                             npy_f32(out, "lesson_probe_mlp.npy", pr.mlp, s_d, 1) ||
                             npy_f32(out, "lesson_probe_embedding.npy", pr.embedding, s_d, 1)));
    free(stream);
    if (bad) goto done;
    rc = 0;
done:
    vit_lesson_free(&ls);
    vit_lesson_probe_free(&pr);
    free(buf);
    return rc;
}

/* --- interventions ---------------------------------------------------------- */

/* "a:b,a:b" (pairs) or "a,a" (pairs 0) into flags[a * stride + b]: 0, or -1 when a
 * value is outside [0, n_a) x [0, n_b). */
static int parse_set(uint8_t *flags, const char *v, int pairs, int n_a, int n_b) {
    const char *p = v;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = 0;
        if (end == p) return -1;
        p = end;
        if (pairs) {
            if (*p++ != ':') return -1;
            b = strtol(p, &end, 10);
            if (end == p) return -1;
            p = end;
        }
        if (a < 0 || a >= n_a || b < 0 || b >= (pairs ? n_b : 1)) return -1;
        flags[a * (pairs ? n_b : 1) + b] = 1;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return 0;
}

/* --- the negative control of --cosine --------------------------------------------- */

/* d = ref: the gradient of the un-normalised dot product e . ref, the plausible mistake
 * (VitScore's grad) the cosine's comparison against autograd must catch. */
static void dot_grad(float *d, const float *e, int n, int lrp, const VitScore *s) {
    (void)e, (void)lrp;
    memcpy(d, s->ref, (size_t)n * sizeof *d);
}

/* --- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    const char *model = NULL, *config = NULL, *image = NULL, *raw = NULL, *out = NULL,
               *layout = NULL;
    int heads = 0, size_h = 0, size_w = 0, whole = 0, target = -2, lesson[4] = {-1, -1, -1, -1};
    float discard = 0.0f;
    VitRunOptions ropt = {0};
    VitImageOptions iopt = {0};
    int imp_class = -2, imp_batch = 0;
    const char *s_ablate = NULL, *s_drop = NULL, *s_fill = NULL, *s_posedit = NULL, *s_temp = NULL;
    const char *s_text = NULL, *s_text2 = NULL;
    float logit_scale = 0.0f, logit_bias = 0.0f;
    int sigmoid = 0, contrast[2] = {-1, -1}, dot = 0;
    const char *s_cosine = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--whole")) {
            whole = 1;
            continue;
        }
        if (!strcmp(a, "--tokens")) {
            ropt.all_tokens = 1;
            continue;
        }
        if (!strcmp(a, "--ignore-orientation")) {
            iopt.ignore_orientation = 1;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--config"))
            config = v;
        else if (!strcmp(a, "--layout"))
            layout = v;
        else if (!strcmp(a, "--image"))
            image = v;
        else if (!strcmp(a, "--input"))
            raw = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--size")) {
            if (sscanf(v, "%dx%d", &size_h, &size_w) != 2 || size_h < 1 || size_w < 1)
                return usage();
        } else if (!strcmp(a, "--att")) {
            if (!strcmp(v, "keep"))
                ropt.att = VIT_ATT_KEEP;
            else if (!strcmp(v, "recompute"))
                ropt.att = VIT_ATT_RECOMPUTE;
            else
                return usage();
        } else if (!strcmp(a, "--threads")) {
            ropt.n_threads = atoi(v);
            if (ropt.n_threads < 1) return usage();
        } else if (!strcmp(a, "--class")) {
            char *end;
            long cl = strtol(v, &end, 10);
            if (*end || cl < -1 || cl > (1 << 20)) return usage();
            target = (int)cl;
        } else if (!strcmp(a, "--lesson")) {
            if (sscanf(v, "%d,%d,%d,%d", &lesson[0], &lesson[1], &lesson[2], &lesson[3]) != 4)
                return usage();
        } else if (!strcmp(a, "--discard")) {
            discard = strtof(v, NULL);
        } else if (!strcmp(a, "--importance")) {
            if (sscanf(v, "%d:%d", &imp_class, &imp_batch) != 2 || imp_class < -1 || imp_batch < 1)
                return usage();
        } else if (!strcmp(a, "--ablate")) {
            s_ablate = v;
        } else if (!strcmp(a, "--drop")) {
            s_drop = v;
        } else if (!strcmp(a, "--fill")) {
            s_fill = v;
        } else if (!strcmp(a, "--pos")) {
            s_posedit = v;
        } else if (!strcmp(a, "--temp")) {
            s_temp = v;
        } else if (!strcmp(a, "--contrast")) {
            if (!v || sscanf(v, "%d,%d", &contrast[0], &contrast[1]) != 2) return usage();
            target = -3;
        } else if (!strcmp(a, "--cosine") || !strcmp(a, "--cosine-dot")) {
            s_cosine = v, dot = !strcmp(a, "--cosine-dot"), target = -3;
        } else if (!strcmp(a, "--then-text-head")) {
            s_text2 = v;
        } else if (!strcmp(a, "--text-head")) {
            s_text = v;
        } else if (!strcmp(a, "--logit-scale")) {
            logit_scale = strtof(v, NULL);
        } else if (!strcmp(a, "--logit-bias")) {
            logit_bias = strtof(v, NULL), sigmoid = 1;
        } else if (!strcmp(a, "--heads")) {
            char *end;
            long h = strtol(v, &end, 10);
            if (*end || h < 1 || h > 65536) return usage();
            heads = (int)h;
        } else
            return usage();
    }
    if (!model || !out || !image == !raw) return usage();

    Vit vit = {0};
    VitRun run = {0};
    VitGrad grad = {0};
    VitImage img = {0};
    float *map = NULL;
    VitError err = {0};
    VitIntervention iv = {0};
    uint8_t *ablate = NULL, *drop = NULL, *fill = NULL;
    int *perm = NULL, use_iv = s_ablate || s_drop || s_fill || s_posedit || s_temp;
    VitBatch batch = {0};
    float *inputs = NULL, *blogits = NULL;
    uint8_t *rgb = NULL;
    float *ref_keep = NULL;
    int rc = 1;
    VitLoadOptions opt = {.n_heads = heads,
                          .config_path = config,
                          .image_h = size_h,
                          .image_w = size_w,
                          .whole_image = whole,
                          .layout_path = layout};
    if (vit_load(&vit, model, &opt, &err)) goto engine_fail;
    if (s_text) { /* CLIP's text head, before the run: the run is sized for C */
        char path[1024];
        int nc = 0;
        const char *colon = strrchr(s_text, ':');
        if (!colon || colon - s_text >= (long)sizeof path || sscanf(colon + 1, "%d", &nc) != 1 ||
            nc < 1 || nc > (1 << 20))
            return usage();
        snprintf(path, sizeof path, "%.*s", (int)(colon - s_text), s_text);
        size_t ne = (size_t)nc * (size_t)(vit.cfg.embed_dim > 0 ? vit.cfg.embed_dim : 1);
        float *emb = malloc(ne * sizeof *emb);
        if (!emb || (vit.cfg.embed_dim > 0 && read_raw(emb, ne, path))) {
            free(emb);
            goto done;
        }
        VitStatus st = vit_set_text_head(&vit, emb, nc, NULL,
                                         logit_scale > 0           ? logit_scale
                                         : vit.cfg.logit_scale > 0 ? vit.cfg.logit_scale
                                                                   : 100.0f,
                                         &err);
        free(emb);
        if (st || (sigmoid && vit_set_text_sigmoid(&vit, logit_bias, &err))) goto engine_fail;
    }
    if (vit_run_init_with(&run, &vit, &ropt, &err)) goto engine_fail;
    const VitConfig *c = &vit.cfg;
    size_t Sh = (size_t)c->image_h, Sw = (size_t)c->image_w, L = (size_t)c->n_layers,
           H = (size_t)c->n_heads, T = (size_t)c->n_tokens, C = (size_t)c->n_classes,
           D = (size_t)c->dim, Npos = (size_t)vit.w.pos_prefix + (size_t)c->n_patches;

    if (image) {
        rgb = malloc(Sh * Sw * 3);
        if (!rgb) {
            fail("out of memory");
            goto done;
        }
        if (vit_image_load_with(&img, image, &iopt, &err) ||
            vit_preprocess(run.input, &run.crop_x, &run.crop_y, &run.crop_w, &run.crop_h, c, &img,
                           &err) ||
            vit_preprocess_rgb(rgb, c, &img, &err))
            goto engine_fail;
    } else if (read_raw(run.input, 3 * Sh * Sw, raw)) {
        goto done;
    }
    if (use_iv) {
        int N = c->n_patches;
        ablate = calloc(L * H, 1), drop = calloc((size_t)N, 1), fill = calloc((size_t)N, 1);
        perm = calloc((size_t)N, sizeof(int));
        if (!ablate || !drop || !fill || !perm) {
            fail("out of memory");
            goto done;
        }
        if ((s_ablate && parse_set(ablate, s_ablate, 1, (int)L, (int)H)) ||
            (s_drop && parse_set(drop, s_drop, 0, N, 1)) ||
            (s_fill && parse_set(fill, s_fill, 0, N, 1))) {
            fail("bad --ablate, --drop or --fill (0-based, in range)");
            goto done;
        }
        iv.ablate = s_ablate ? ablate : NULL;
        iv.drop = s_drop ? drop : NULL;
        iv.fill = s_fill ? fill : NULL;
        unsigned long long seed;
        if (s_posedit && !strcmp(s_posedit, "zero")) {
            iv.pos_embed = VIT_POS_ZERO;
        } else if (s_posedit && sscanf(s_posedit, "shuffle:%llu", &seed) == 1) {
            vit_pos_permutation(perm, N, seed);
            iv.pos_embed = VIT_POS_SHUFFLE, iv.pos_perm = perm;
        } else if (s_posedit) {
            return usage();
        }
        if (s_temp && sscanf(s_temp, "%d:%f", &iv.temp_layer, &iv.temperature) != 2) return usage();
        if (vit_intervention_check(&iv, c, &err)) goto engine_fail;
        run.intervention = &iv;
    }
    vit_forward(&run, &vit);
    if (s_text2) { /* a new phrase set for the same pass: vit_text_logits */
        size_t ne = (size_t)c->n_classes * (size_t)(c->embed_dim > 0 ? c->embed_dim : 1);
        float *emb = malloc(ne * sizeof *emb);
        if (!emb || !s_text || read_raw(emb, ne, s_text2)) {
            free(emb);
            if (!s_text) fail("--then-text-head needs --text-head");
            goto done;
        }
        VitStatus st = vit_set_text_head(&vit, emb, c->n_classes, NULL, vit.w.text_scale, &err);
        free(emb);
        if (st || (sigmoid && vit_set_text_sigmoid(&vit, logit_bias, &err)) ||
            vit_text_logits(&run, &vit, &err))
            goto engine_fail;
    }

    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fail("%s: cannot create directory: %s", out, strerror(errno));
        goto done;
    }
    const size_t s_input[3] = {3, Sh, Sw}, s_rgb[3] = {Sh, Sw, 3}, s_att[4] = {L, H, T, T},
                 s_cls[1] = {C}, s_pos[2] = {Npos, D},
                 s_rope[2] = {(size_t)c->n_patches, (size_t)c->head_dim},
                 s_img[3] = {(size_t)img.h, (size_t)img.w, 3};
    if (npy_f32(out, "input.npy", run.input, s_input, 3) ||
        (rgb && npy_write(out, "rgb.npy", "|u1", rgb, 1, s_rgb, 3)) ||
        (img.rgb && npy_write(out, "image.npy", "|u1", img.rgb, 1, s_img, 3)) ||
        (run.att && npy_f32(out, "att.npy", run.att, s_att, 4)) ||
        (vit.w.pos_embed && npy_f32(out, "pos.npy", vit.w.pos_embed, s_pos, 2)) ||
        (vit.w.rope && npy_f32(out, "rope.npy", vit.w.rope, s_rope, 2)) ||
        (run.probe_att &&
         npy_f32(out, "probe_att.npy", run.probe_att, (size_t[2]){H, (size_t)c->n_patches}, 2)) ||
        (vit.w.head_dist_w && npy_f32(out, "logits_dist.npy", run.logits_dist, s_cls, 1)) ||
        (C && (npy_f32(out, "logits.npy", run.logits, s_cls, 1) ||
               npy_f32(out, "probs.npy", run.probs, s_cls, 1))) ||
        write_config(out, &run, &vit, target))
        goto done;
    if (c->embed_dim > 0) { /* CLIP's image embedding */
        float *e = malloc((size_t)c->embed_dim * sizeof *e);
        const size_t s_e[1] = {(size_t)c->embed_dim};
        int bad = !e || vit_image_embed(e, &run, &vit, &err);
        if (!bad && npy_f32(out, "embed.npy", e, s_e, 1)) bad = 2;
        free(e);
        if (bad == 1) goto engine_fail;
        if (bad) goto done;
    }
    if (use_iv) {
        size_t N = (size_t)c->n_patches;
        const size_t s_perm[1] = {N}, s_cls_att[3] = {L, H, N}, s_b[2] = {3, C};
        if (!(map = malloc(L * H * N * sizeof(float)))) {
            fail("out of memory");
            goto done;
        }
        for (size_t l = 0; l < L; l++)
            for (size_t h = 0; h < H; h++)
                if (vit_map_attention(map + (l * H + h) * N, &run, (int)l, (int)h, 0, &err))
                    goto engine_fail;
        if ((iv.pos_perm && npy_write(out, "pos_perm.npy", "<i4", perm, 4, s_perm, 1)) ||
            npy_f32(out, "cls_att.npy", map, s_cls_att, 3))
            goto done;
        free(map);
        map = NULL;
        if (C) {
            size_t in = 3 * Sh * Sw;
            inputs = malloc(3 * in * sizeof(float));
            blogits = malloc(3 * C * sizeof(float));
            if (!inputs || !blogits) {
                fail("out of memory");
                goto done;
            }
            for (int k = 0; k < 3; k++) memcpy(inputs + k * in, run.input, in * sizeof(float));
            if (vit_batch_init(&batch, &vit, 3, ropt.n_threads, &err)) goto engine_fail;
            batch.intervention = &iv;
            if (vit_forward_batch(&batch, &vit, inputs, 3, blogits, NULL, &err)) goto engine_fail;
            if (npy_f32(out, "batch_logits.npy", blogits, s_b, 2)) goto done;
        }
    }
    if (imp_class != -2) {
        size_t LH = L * H;
        const size_t s_lh[2] = {L, H}, s_pr[1] = {LH + 1}, s_or[1] = {LH};
        float *imp = malloc(LH * sizeof(float)), *pr = malloc((LH + 1) * sizeof(float)), base = 0;
        int *ord = malloc(LH * sizeof(int)), cls = imp_class;
        VitBatch ib = {0};
        int bad = !imp || !pr || !ord;
        if (cls == -1 && C) vit_top_k(&cls, run.probs, (int)C, 1);
        if (!bad && !vit_batch_init(&ib, &vit, imp_batch, ropt.n_threads, &err)) {
            ib.intervention = use_iv ? &iv : NULL;
            bad = vit_head_importance(imp, &base, &ib, &vit, run.input, cls, &err) ||
                  vit_head_pruning(pr, ord, &ib, &vit, run.input, imp, cls, &err);
        } else {
            bad = 1;
        }
        vit_batch_free(&ib);
        char path[1200];
        snprintf(path, sizeof path, "%s/importance.json", out);
        FILE *f = bad ? NULL : fopen(path, "w");
        if (f) fprintf(f, "{\"importance_base\": %.9g, \"importance_class\": %d}\n", base, cls);
        if (f) fclose(f);
        int wrc = bad || !f || npy_f32(out, "importance.npy", imp, s_lh, 2) ||
                  npy_f32(out, "prune.npy", pr, s_pr, 1) ||
                  npy_write(out, "order.npy", "<i4", ord, 4, s_or, 1);
        free(imp), free(pr), free(ord);
        if (wrc) {
            if (bad && err.msg[0]) goto engine_fail;
            fail("head importance: cannot write %s", out);
            goto done;
        }
    }
    if (target != -2) {
        const size_t s_grid[2] = {(size_t)c->grid_h, (size_t)c->grid_w}, s_px[2] = {Sh, Sw},
                     s_tok[3] = {L, T, D};
        size_t E = (size_t)vit_embedding_dim(&vit);
        float *ref = s_cosine ? malloc(E * sizeof *ref) : NULL, *emb = malloc(E * sizeof *emb);
        VitScore sc = s_cosine           ? vit_score_cosine(ref)
                      : contrast[0] >= 0 ? vit_score_contrast(contrast[0], contrast[1])
                                         : vit_score_logit(target);
        if (dot) sc.grad = dot_grad;
        if (!emb || (s_cosine && (!ref || read_raw(ref, E, s_cosine)))) {
            free(ref), free(emb);
            goto done;
        }
        int bad = vit_embedding(emb, &run, &vit, &err) || vit_grad_init(&grad, &vit, &run, &err) ||
                  (target >= -1 ? vit_backward(&grad, &run, &vit, target, VIT_GRAD_ALL, &err)
                                : vit_backward_score(&grad, &run, &vit, &sc, VIT_GRAD_ALL, &err));
        if (!bad && npy_f32(out, "embedding.npy", emb, (size_t[1]){E}, 1)) bad = 2;
        free(emb);
        if (bad) free(ref);
        if (bad == 1) goto engine_fail;
        if (bad) goto done;
        ref_keep = ref; /* the score's ref, held until the maps are made */
        if (!(map = malloc(Sh * Sw * sizeof(float)))) {
            fail("out of memory");
            goto done;
        }
        if ((grad.grad_att && npy_f32(out, "grad_att.npy", grad.grad_att, s_att, 4)) ||
            npy_f32(out, "grad_tokens.npy", grad.grad_tokens, s_tok, 3) ||
            npy_f32(out, "grad_input.npy", grad.grad_input, s_input, 3) ||
            npy_f32(out, "lrp_input.npy", grad.lrp_input, s_input, 3) ||
            write_config(out, &run, &vit, grad.target))
            goto done;
        for (int m = 0; m < VIT_EXPLAIN_COUNT; m++) {
            char name[64];
            snprintf(name, sizeof name, "expl_%s.npy", vit_explain_name((VitExplain)m));
            for (char *q = name; *q; q++) *q = *q == '-' ? '_' : *q;
            if (vit_explain(map, (VitExplain)m, &run, &grad, &vit, discard, &err)) goto engine_fail;
            if (npy_f32(out, name, map, vit_explain_pixels((VitExplain)m) ? s_px : s_grid, 2))
                goto done;
        }
        if (c->clip) { /* CLIP: LeGrad's map from its own pass (VIT_GRAD_LEGRAD) too */
            vit_grad_free(&grad);
            if (vit_grad_init(&grad, &vit, &run, &err) ||
                (target >= -1
                     ? vit_backward(&grad, &run, &vit, target, VIT_GRAD_LEGRAD, &err)
                     : vit_backward_score(&grad, &run, &vit, &sc, VIT_GRAD_LEGRAD, &err)) ||
                vit_explain(map, VIT_EXPLAIN_LEGRAD, &run, &grad, &vit, 0.0f, &err))
                goto engine_fail;
            if (npy_f32(out, "legrad_only.npy", map, s_grid, 2)) goto done;
        }
    }
    if (lesson[0] >= 0) {
        int lrc = write_lesson(out, &run, &vit, lesson[0], lesson[1], lesson[2], lesson[3], &err);
        if (lrc < 0) goto engine_fail;
        if (lrc) goto done;
    }
    if (ropt.all_tokens) {
        int trc = write_tokens(out, &run, &vit, &err);
        if (trc < 0) goto engine_fail;
        if (trc) goto done;
    }
    printf("%s: S=%zux%zu P=%d grid=%dx%d Np=%d D=%d H=%zu L=%zu F=%d C=%zu -> %s\n", c->name, Sh,
           Sw, c->patch_size, c->grid_h, c->grid_w, c->n_prefix, c->dim, H, L, c->mlp_dim, C, out);
    rc = 0;
    goto done;

engine_fail:
    fail("%s (%s error)", err.msg, vit_status_name(err.code));
done:
    free(rgb), free(ref_keep);
    free(ablate), free(drop), free(fill), free(perm), free(inputs), free(blogits);
    vit_batch_free(&batch);
    free(map);
    vit_grad_free(&grad);
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}
