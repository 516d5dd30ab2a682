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
 *   pos.npy     [Npos + N, D] f4 the position embedding the forward pass adds
 *   logits.npy  [C] f4, probs.npy [C] f4   (only when the model has a head, C > 0)
 *   logits_dist.npy [C] f4      the distillation head's own logits (if any)
 *   config.json what the engine inferred: Sh, Sw, P, gh, gw, prefix tokens, D,
 *               H, L, F, C, eps, the crop rectangle and the top-5 class indices.
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
    fprintf(f, "], \"target\": %d}\n", target);
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

/* --- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    const char *model = NULL, *config = NULL, *image = NULL, *raw = NULL, *out = NULL,
               *layout = NULL;
    int heads = 0, size_h = 0, size_w = 0, whole = 0, target = -2;
    float discard = 0.0f;
    VitRunOptions ropt = {0};
    VitImageOptions iopt = {0};
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
        } else if (!strcmp(a, "--discard")) {
            discard = strtof(v, NULL);
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
    uint8_t *rgb = NULL;
    int rc = 1;
    VitLoadOptions opt = {.n_heads = heads,
                          .config_path = config,
                          .image_h = size_h,
                          .image_w = size_w,
                          .whole_image = whole,
                          .layout_path = layout};
    if (vit_load(&vit, model, &opt, &err) || vit_run_init_with(&run, &vit, &ropt, &err))
        goto engine_fail;
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
    vit_forward(&run, &vit);

    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fail("%s: cannot create directory: %s", out, strerror(errno));
        goto done;
    }
    const size_t s_input[3] = {3, Sh, Sw}, s_rgb[3] = {Sh, Sw, 3}, s_att[4] = {L, H, T, T},
                 s_cls[1] = {C}, s_pos[2] = {Npos, D}, s_img[3] = {(size_t)img.h, (size_t)img.w, 3};
    if (npy_f32(out, "input.npy", run.input, s_input, 3) ||
        (rgb && npy_write(out, "rgb.npy", "|u1", rgb, 1, s_rgb, 3)) ||
        (img.rgb && npy_write(out, "image.npy", "|u1", img.rgb, 1, s_img, 3)) ||
        (run.att && npy_f32(out, "att.npy", run.att, s_att, 4)) ||
        npy_f32(out, "pos.npy", vit.w.pos_embed, s_pos, 2) ||
        (vit.w.head_dist_w && npy_f32(out, "logits_dist.npy", run.logits_dist, s_cls, 1)) ||
        (C && (npy_f32(out, "logits.npy", run.logits, s_cls, 1) ||
               npy_f32(out, "probs.npy", run.probs, s_cls, 1))) ||
        write_config(out, &run, &vit, target))
        goto done;
    if (target != -2) {
        const size_t s_grid[2] = {(size_t)c->grid_h, (size_t)c->grid_w}, s_px[2] = {Sh, Sw},
                     s_tok[3] = {L, T, D};
        if (vit_grad_init(&grad, &vit, &run, &err) ||
            vit_backward(&grad, &run, &vit, target, VIT_GRAD_ALL, &err))
            goto engine_fail;
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
    free(rgb);
    free(map);
    vit_grad_free(&grad);
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}
