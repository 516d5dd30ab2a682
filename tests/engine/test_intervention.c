/* test_intervention.c - interventions (vit.h, "Interventions") that change nothing
 * change nothing, bit for bit, and bad ones are refused.
 *
 *   test_intervention SCRATCH_DIR
 *
 * On a tiny timm ViT (testlib's weights, T = 145 > VIT_ATT_BLOCK: attention blocks are
 * crossed), with the attention kept and recomputed:
 *   - vit_forward with VitRun.intervention NULL, pointing at a zeroed VitIntervention,
 *     and at one whose ablate / drop / fill arrays are all 0 (with pos_embed KEEP and no
 *     temperature): the logits, probabilities, every layer's tokens and attention (kept)
 *     or the CLS maps of every head (recomputed) have the same bytes; so do
 *     vit_forward_batch's logits and vit_backward's gradients (grad_att, grad_input);
 *   - the control: one head ablated changes the logits (the comparison can fail);
 *   - vit_intervention_active on each;
 *   - vit_intervention_check's errors: every patch dropped, a temperature < 0, NaN or
 *     infinite, on a layer out of range, a shuffle without permutation or with a repeated
 *     entry or one out of range, a pos_embed value out of range; vit_forward_batch and
 *     vit_backward refuse such an intervention with VIT_ERR_ARG;
 *   - vit_pos_permutation: a permutation, the same for the same seed, another for
 *     another seed; vit_intervention_mask puts NaN at the dropped patches only. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 64, L = 3, P = 4, GRID = 12, F = 128, C = 10, HEADS = 4 };

typedef struct {
    float *logits, *probs, *tokens, *att, *maps, *batch, *grad_att, *grad_input;
} Out;

static void out_free(Out *o) {
    free(o->logits), free(o->probs), free(o->tokens), free(o->att), free(o->maps);
    free(o->batch), free(o->grad_att), free(o->grad_input);
    memset(o, 0, sizeof *o);
}

static float *copy(const float *p, size_t n) {
    if (!p) return NULL;
    float *q = malloc(n * sizeof(float));
    if (q) memcpy(q, p, n * sizeof(float));
    return q;
}

/* Everything a pass with intervention iv gives, copied into o. 0 on an engine error. */
static int run_all(Out *o, const Vit *vit, const float *input, const VitIntervention *iv,
                   VitAttStorage how) {
    const VitConfig *c = &vit->cfg;
    size_t T = (size_t)c->n_tokens, N = (size_t)c->n_patches,
           S = 3 * (size_t)c->image_h * c->image_w;
    VitRun run = {0};
    VitGrad g = {0};
    VitBatch b = {0};
    VitError err = {0};
    VitRunOptions ro = {.n_threads = 2, .att = how, .all_tokens = 1};
    int ok = 0;
    float *inputs = malloc(2 * S * sizeof(float)), *blg = malloc(2 * C * sizeof(float));
    if (!inputs || !blg || vit_run_init_with(&run, vit, &ro, &err)) goto done;
    memcpy(run.input, input, S * sizeof(float));
    run.intervention = iv;
    vit_forward(&run, vit);
    o->logits = copy(run.logits, C);
    o->probs = copy(run.probs, C);
    o->tokens = copy(run.tokens, (L + 1) * T * D);
    o->att = copy(run.att, (size_t)L * HEADS * T * T);
    o->maps = malloc((size_t)L * HEADS * N * sizeof(float));
    if (!o->maps) goto done;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < HEADS; h++)
            if (vit_map_attention(o->maps + ((size_t)l * HEADS + h) * N, &run, l, h, 0, &err))
                goto done;
    memcpy(inputs, input, S * sizeof(float));
    memcpy(inputs + S, input, S * sizeof(float));
    if (vit_batch_init(&b, vit, 2, 2, &err)) goto done;
    b.intervention = iv;
    if (vit_forward_batch(&b, vit, inputs, 2, blg, NULL, &err)) goto done;
    o->batch = copy(blg, 2 * C);
    if (vit_grad_init(&g, vit, &run, &err) || vit_backward(&g, &run, vit, 3, VIT_GRAD_EXACT, &err))
        goto done;
    o->grad_att = copy(g.grad_att, (size_t)L * HEADS * T * T);
    o->grad_input = copy(g.grad_input, S);
    ok = 1;
done:
    if (!ok) check(0, "engine: %s", err.msg);
    free(inputs), free(blg);
    vit_grad_free(&g), vit_batch_free(&b), vit_run_free(&run);
    return ok;
}

static int same(const float *a, const float *b, size_t n) {
    if (!a || !b) return a == b;
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void compare(const Out *a, const Out *b, const Vit *vit, const char *what) {
    size_t T = (size_t)vit->cfg.n_tokens, N = (size_t)vit->cfg.n_patches,
           S = 3 * (size_t)vit->cfg.image_h * vit->cfg.image_w;
    check(same(a->logits, b->logits, C) && same(a->probs, b->probs, C),
          "%s: logits and probabilities bit for bit", what);
    check(same(a->tokens, b->tokens, (L + 1) * T * D), "%s: every layer's tokens bit for bit",
          what);
    check(same(a->att, b->att, (size_t)L * HEADS * T * T), "%s: attention bit for bit", what);
    check(same(a->maps, b->maps, (size_t)L * HEADS * N), "%s: CLS maps bit for bit", what);
    check(same(a->batch, b->batch, 2 * C), "%s: vit_forward_batch's logits bit for bit", what);
    check(same(a->grad_att, b->grad_att, (size_t)L * HEADS * T * T) &&
              same(a->grad_input, b->grad_input, S),
          "%s: vit_backward's grad_att and grad_input bit for bit", what);
}

static void check_refused(const Vit *vit, const VitIntervention *iv, const char *key,
                          const char *what) {
    VitError err = {0};
    const char *keys[] = {key, NULL};
    check_err(vit_intervention_check(iv, &vit->cfg, &err), &err, VIT_ERR_ARG, NULL, keys, what);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    char path[1100];
    if (make_dir(argv[1]) != 0) return 2;
    path_join(path, sizeof path, argv[1], "interv.safetensors");
    Model m;
    model_tiny(&m, D, L, P, GRID, F, C);
    if (model_write(&m, path)) return check(0, "cannot write %s", path), t_finish("intervention");
    Vit vit = {0};
    VitError err = {0};
    VitLoadOptions lo = {.n_heads = HEADS};
    if (!check_err(vit_load(&vit, path, &lo, &err), &err, VIT_OK, NULL, NULL, "load"))
        return t_finish("intervention");
    const VitConfig *c = &vit.cfg;
    int N = c->n_patches;
    size_t S = 3 * (size_t)c->image_h * c->image_w;
    float *input = malloc(S * sizeof(float));
    uint8_t *ablate = calloc(L * HEADS, 1), *drop = calloc((size_t)N, 1),
            *fill = calloc((size_t)N, 1);
    int *perm = malloc((size_t)N * sizeof(int)), *perm2 = malloc((size_t)N * sizeof(int));
    float *map = malloc((size_t)N * sizeof(float));
    if (!input || !ablate || !drop || !fill || !perm || !perm2 || !map) return 2;
    uint32_t st = 12345u;
    for (size_t i = 0; i < S; i++) {
        st = st * 1664525u + 1013904223u;
        input[i] = (float)(st >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }

    /* --- nothing active: bit for bit ---------------------------------------------- */
    VitIntervention zero = {0};
    VitIntervention empty = {.ablate = ablate, .drop = drop, .fill = fill, .temp_layer = 1};
    check(!vit_intervention_active(NULL, c) && !vit_intervention_active(&zero, c) &&
              !vit_intervention_active(&empty, c),
          "vit_intervention_active: NULL, zeroed and all-0 arrays are inactive");
    static const VitAttStorage hows[2] = {VIT_ATT_KEEP, VIT_ATT_RECOMPUTE};
    for (int k = 0; k < 2; k++) {
        Out base = {0}, o1 = {0}, o2 = {0}, o3 = {0};
        const char *hn = k ? "recomputed" : "kept";
        char what[96];
        if (run_all(&base, &vit, input, NULL, hows[k]) &&
            run_all(&o1, &vit, input, &zero, hows[k]) &&
            run_all(&o2, &vit, input, &empty, hows[k])) {
            snprintf(what, sizeof what, "attention %s, zeroed intervention", hn);
            compare(&base, &o1, &vit, what);
            snprintf(what, sizeof what, "attention %s, all-0 arrays", hn);
            compare(&base, &o2, &vit, what);
            /* the control: an active intervention does change the outputs */
            ablate[1 * HEADS + 2] = 1;
            check(vit_intervention_active(&empty, c), "one head ablated is active");
            if (run_all(&o3, &vit, input, &empty, hows[k]))
                check(!same(base.logits, o3.logits, C) && !same(base.batch, o3.batch, 2 * C) &&
                          !same(base.grad_input, o3.grad_input, S),
                      "control (attention %s): one head ablated changes the logits, the batch's "
                      "and the gradient",
                      hn);
            ablate[1 * HEADS + 2] = 0;
        }
        out_free(&base), out_free(&o1), out_free(&o2), out_free(&o3);
    }

    /* --- errors ---------------------------------------------------------------------- */
    memset(drop, 1, (size_t)N);
    VitIntervention bad = {.drop = drop};
    check_refused(&vit, &bad, "every one of", "every patch dropped");
    drop[5] = 0;
    check(vit_intervention_check(&bad, c, &err) == VIT_OK, "one patch kept: accepted");
    VitRun run = {0};
    VitGrad g = {0};
    VitBatch b = {0};
    drop[5] = 1;
    if (vit_run_init(&run, &vit, &err) == VIT_OK &&
        vit_batch_init(&b, &vit, 1, 1, &err) == VIT_OK) {
        memcpy(run.input, input, S * sizeof(float));
        vit_forward(&run, &vit);
        b.intervention = &bad;
        const char *keys[] = {"every one of", NULL};
        check_err(vit_forward_batch(&b, &vit, input, 1, NULL, NULL, &err), &err, VIT_ERR_ARG, NULL,
                  keys, "vit_forward_batch refuses every patch dropped");
        run.intervention = &bad;
        if (vit_grad_init(&g, &vit, &run, &err) == VIT_OK)
            check_err(vit_backward(&g, &run, &vit, 0, VIT_GRAD_EXACT, &err), &err, VIT_ERR_ARG,
                      NULL, keys, "vit_backward refuses every patch dropped");
    }
    vit_grad_free(&g), vit_batch_free(&b), vit_run_free(&run);
    const float temps[3] = {-1.0f, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        VitIntervention t = {.temperature = temps[i], .temp_layer = 0};
        check_refused(&vit, &t, "temperature", "a temperature < 0, NaN or infinite");
    }
    VitIntervention tl = {.temperature = 2.0f, .temp_layer = L};
    check_refused(&vit, &tl, "layer 3", "a temperature on a layer out of range");
    tl.temp_layer = -1;
    check_refused(&vit, &tl, "layer -1", "a temperature on layer -1");
    VitIntervention ps = {.pos_embed = VIT_POS_SHUFFLE};
    check_refused(&vit, &ps, "without a permutation", "a shuffle without permutation");
    for (int p = 0; p < N; p++) perm[p] = p;
    perm[7] = 6;
    ps.pos_perm = perm;
    check_refused(&vit, &ps, "entry 7 is 6", "a repeated entry in the permutation");
    perm[7] = N;
    check_refused(&vit, &ps, "permutation", "an entry out of range");
    VitIntervention pe = {.pos_embed = (VitPosEdit)7};
    check_refused(&vit, &pe, "edit 7", "a pos_embed value out of range");
    check(vit_intervention_check(NULL, c, &err) == VIT_OK, "NULL: nothing to check");

    /* --- head importance: errors, and the same table whatever the batch size --------- */
    {
        float imp1[L * HEADS], imp4[L * HEADS], base1 = 0, base4 = 0, pr[L * HEADS + 1];
        int order[L * HEADS];
        VitBatch b1 = {0}, b4 = {0};
        if (vit_batch_init(&b1, &vit, 1, 2, &err) == VIT_OK &&
            vit_batch_init(&b4, &vit, 4, 2, &err) == VIT_OK) {
            const char *kc[] = {"class 10 out of range", NULL}, *ki[] = {"no input", NULL};
            float p_all[C];
            int top = 0;
            if (!vit_forward_batch(&b4, &vit, input, 1, NULL, p_all, &err))
                vit_top_k(&top, p_all, C, 1);
            check_err(vit_head_importance(imp1, NULL, &b1, &vit, input, C, &err), &err, VIT_ERR_ARG,
                      NULL, kc, "vit_head_importance: a class out of range");
            check_err(vit_head_importance(imp1, NULL, &b1, &vit, NULL, 0, &err), &err, VIT_ERR_ARG,
                      NULL, ki, "vit_head_importance: no input");
            if (check(!vit_head_importance(imp1, &base1, &b1, &vit, input, top, &err) &&
                          !vit_head_importance(imp4, &base4, &b4, &vit, input, top, &err),
                      "vit_head_importance at max_batch 1 and 4")) {
                double d = fabs((double)base1 - base4);
                for (int i = 0; i < L * HEADS; i++) d = fmax(d, fabs((double)imp1[i] - imp4[i]));
                check(d <= 1e-6, "the same table at max_batch 1 and 4 (max diff %.1e)", d);
                float pr1[L * HEADS + 1];
                int order1[L * HEADS];
                int prc = vit_head_pruning(pr, order, &b4, &vit, input, imp4, top, &err) ||
                          vit_head_pruning(pr1, order1, &b1, &vit, input, imp4, top, &err);
                double dp = 0.0;
                for (int i = 0; !prc && i <= L * HEADS; i++)
                    dp = fmax(dp, fabs((double)pr[i] - pr1[i]));
                check(!prc && dp <= 1e-6 && !memcmp(order, order1, sizeof order),
                      "vit_head_pruning: the same curve at max_batch 1 and 4 (max diff %.1e)", dp);
                check(!prc && fabs((double)pr[0] - base4) <= 1e-6 && base4 > 1.0f / C,
                      "vit_head_pruning: k = 0 is the model's probability (%.6f, %.6f)", pr[0],
                      base4);
            }
            imp4[3] = NAN;
            const char *kn[] = {"importance[3]", NULL};
            check_err(vit_head_pruning(pr, order, &b4, &vit, input, imp4, 2, &err), &err,
                      VIT_ERR_ARG, NULL, kn, "vit_head_pruning: a NaN importance");
        }
        vit_batch_free(&b1), vit_batch_free(&b4);
    }

    /* --- helpers ----------------------------------------------------------------------- */
    vit_pos_permutation(perm, N, 42);
    vit_pos_permutation(perm2, N, 42);
    int is_perm = 1, moved = 0;
    uint8_t *seen = calloc((size_t)N, 1);
    for (int p = 0; p < N && seen; p++) {
        if (perm[p] < 0 || perm[p] >= N || seen[perm[p]])
            is_perm = 0;
        else
            seen[perm[p]] = 1;
        moved += perm[p] != p;
    }
    free(seen);
    check(is_perm && moved > N / 2, "vit_pos_permutation: a permutation that moves %d of %d", moved,
          N);
    check(!memcmp(perm, perm2, (size_t)N * sizeof(int)), "vit_pos_permutation: same seed, same");
    vit_pos_permutation(perm2, N, 43);
    check(memcmp(perm, perm2, (size_t)N * sizeof(int)) != 0,
          "vit_pos_permutation: seed 43 differs");
    ps.pos_perm = perm;
    check(vit_intervention_check(&ps, c, &err) == VIT_OK,
          "a shuffle with its permutation: accepted");
    memset(drop, 0, (size_t)N);
    drop[3] = drop[N - 1] = 1;
    VitIntervention dm = {.drop = drop};
    for (int p = 0; p < N; p++) map[p] = (float)p;
    vit_intervention_mask(map, &dm, c);
    int ok = isnan(map[3]) && isnan(map[N - 1]);
    for (int p = 0; p < N; p++)
        if (p != 3 && p != N - 1 && map[p] != (float)p) ok = 0;
    check(ok, "vit_intervention_mask: NaN at the dropped patches only");

    free(input), free(ablate), free(drop), free(fill), free(perm), free(perm2), free(map);
    vit_free(&vit);
    return t_finish("intervention");
}
