/* text_dump.c - run CLIP's text tower (vit_text_load, vit_text_embed) once and write the
 * embeddings, for test_text_tower.py to compare with its PyTorch reference.
 *
 *   text_dump --model M.safetensors|M.pth --ids IDS.txt --out EMB.f32
 *             [--threads K] [--act quick_gelu|gelu|gelu_tanh] [--heads H]
 *             [--images IMG.f32 --scores SCORES.f32]
 *
 * IDS.txt holds one token sequence per line, ids separated by spaces. EMB.f32 receives
 * the embeddings [n, E] as raw float32 in host byte order; stdout one line of JSON with
 * what the loader read (V, ctx, W, H, L, F, E, eps, act, act_from, naming, logit_scale).
 * --act and --heads override the loaded config (VitText's cfg.act, cfg.n_heads).
 * --images: image embeddings [m, E] (raw float32); SCORES.f32 then receives vit_text_scores'
 * logits [m, n] and probabilities [m, n] against the n embeddings.
 * Errors: the engine's message on stderr, exit 1 (2 for a usage error). */
#include "vit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fputs("usage: text_dump --model M --ids IDS.txt --out EMB.f32 [--threads K]\n"
          "                 [--act quick_gelu|gelu|gelu_tanh] [--heads H]\n",
          stderr);
    return 2;
}

/* Sequences of IDS.txt into *ids (n of them, lens [n]); 0 on success. */
static int read_ids(const char *path, int ***ids, int **lens, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return fprintf(stderr, "text_dump: %s: %s\n", path, strerror(errno)), 1;
    char line[1 << 16];
    int cap = 0;
    *n = 0, *ids = NULL, *lens = NULL;
    while (fgets(line, sizeof line, f)) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            *ids = realloc(*ids, (size_t)cap * sizeof **ids);
            *lens = realloc(*lens, (size_t)cap * sizeof **lens);
            if (!*ids || !*lens) return fclose(f), 1;
        }
        int *seq = malloc(sizeof line / 2 * sizeof *seq), k = 0;
        if (!seq) return fclose(f), 1;
        for (char *p = line, *end;; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p) break;
            seq[k++] = (int)v;
        }
        (*ids)[*n] = seq;
        (*lens)[(*n)++] = k;
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL, *out_path = NULL, *act = NULL, *img_path = NULL,
               *scores_path = NULL;
    int threads = 1, heads = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        if (!strcmp(argv[i], "--model"))
            model = argv[++i];
        else if (!strcmp(argv[i], "--ids"))
            ids_path = argv[++i];
        else if (!strcmp(argv[i], "--out"))
            out_path = argv[++i];
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--act"))
            act = argv[++i];
        else if (!strcmp(argv[i], "--heads"))
            heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--images"))
            img_path = argv[++i];
        else if (!strcmp(argv[i], "--scores"))
            scores_path = argv[++i];
        else
            return usage();
    }
    if (!model || !ids_path || !out_path) return usage();
    VitText t = {0};
    VitError err;
    if (vit_text_load(&t, model, &err))
        return fprintf(stderr, "text_dump: %s (%s)\n", err.msg, vit_status_name(err.code)), 1;
    if (act) {
        if (!strcmp(act, "quick_gelu"))
            t.cfg.act = VIT_ACT_QUICK_GELU;
        else if (!strcmp(act, "gelu"))
            t.cfg.act = VIT_ACT_GELU;
        else if (!strcmp(act, "gelu_tanh"))
            t.cfg.act = VIT_ACT_GELU_TANH;
        else
            return usage();
        t.cfg.act_from = "--act";
    }
    if (heads) t.cfg.n_heads = heads;
    int **ids = NULL, *lens = NULL, n = 0;
    if (read_ids(ids_path, &ids, &lens, &n)) return fprintf(stderr, "text_dump: bad ids\n"), 1;
    size_t E = (size_t)t.cfg.embed_dim;
    float *emb = malloc((n ? (size_t)n : 1) * E * sizeof *emb);
    if (!emb) return 1;
    if (vit_text_embed(emb, &t, (const int *const *)ids, lens, n, threads, &err))
        return fprintf(stderr, "text_dump: %s (%s)\n", err.msg, vit_status_name(err.code)), 1;
    FILE *f = fopen(out_path, "wb");
    if (!f || fwrite(emb, sizeof *emb, (size_t)n * E, f) != (size_t)n * E || fclose(f))
        return fprintf(stderr, "text_dump: %s: cannot write\n", out_path), 1;
    if (img_path && scores_path) {
        FILE *fi = fopen(img_path, "rb");
        if (!fi) return fprintf(stderr, "text_dump: %s: %s\n", img_path, strerror(errno)), 1;
        float *img = malloc(1024 * E * sizeof *img);
        size_t m = img ? fread(img, sizeof *img * E, 1024, fi) : 0;
        fclose(fi);
        float *sc = malloc(2 * m * (size_t)(n ? n : 1) * sizeof *sc);
        if (!sc || vit_text_scores(sc, sc + m * (size_t)n, img, (int)m, emb, n, &t, &err))
            return fprintf(stderr, "text_dump: %s\n", sc ? err.msg : "out of memory"), 1;
        FILE *fs = fopen(scores_path, "wb");
        if (!fs || fwrite(sc, sizeof *sc, 2 * m * (size_t)n, fs) != 2 * m * (size_t)n || fclose(fs))
            return fprintf(stderr, "text_dump: %s: cannot write\n", scores_path), 1;
        free(img);
        free(sc);
    }
    static const char *const acts[] = {"gelu", "gelu_tanh", "quick_gelu", "relu"};
    const VitTextConfig *c = &t.cfg;
    printf("{\"V\": %d, \"ctx\": %d, \"W\": %d, \"H\": %d, \"L\": %d, \"F\": %d, \"E\": %d, "
           "\"eps\": %g, \"act\": \"%s\", \"act_from\": \"%s\", \"naming\": \"%s\", "
           "\"logit_scale\": %.9g, \"logit_bias\": %.9g, \"sigmoid\": %d, \"pool\": \"%s\", "
           "\"n\": %d}\n",
           c->vocab_size, c->context, c->width, c->n_heads, c->n_layers, c->mlp_dim, c->embed_dim,
           (double)c->ln_eps, acts[c->act], c->act_from,
           c->naming == VIT_NAMES_HF ? "hf" : "openai", (double)t.logit_scale, (double)t.logit_bias,
           t.sigmoid, c->pool == VIT_TEXT_POOL_LAST ? "last" : "eot", n);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(emb);
    vit_text_free(&t);
    return 0;
}
