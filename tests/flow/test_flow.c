/* test_flow.c - attention flow in C (engine/maps/flow.c): bad arguments, graphs worked by
 * hand, a plain max flow (Edmonds-Karp on the whole graph's capacity matrix, no
 * pruning, no reversal) against the engine's on random graphs, the same flows bit for
 * bit on 1 to 4 threads, and vit_attention_flow on a tiny model with its attention
 * kept and recomputed.
 *
 *   test_flow SCRATCH_DIR */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- a plain max flow: the reference -------------------------------------- */

/* Edmonds-Karp on the (L + 1) * T nodes of the layered graph as one dense residual
 * matrix r[V, V] (double), node (l, i) = l * T + i. Max flow from (0, j) to (L, q). */
static double max_flow_naive(const float *cap, int L, int T, int q, int j) {
    int V = (L + 1) * T, s = j, t = L * T + q;
    double *r = calloc((size_t)V * V, sizeof(double));
    int *prev = malloc((size_t)V * sizeof(int)), *queue = malloc((size_t)V * sizeof(int));
    if (!r || !prev || !queue) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int l = 0; l < L; l++)
        for (int i = 0; i < T; i++)
            for (int k = 0; k < T; k++)
                r[(size_t)(l * T + k) * V + (l + 1) * T + i] = cap[((size_t)l * T + i) * T + k];
    double total = 0.0;
    for (;;) {
        for (int v = 0; v < V; v++) prev[v] = -1;
        int head = 0, tail = 0;
        queue[tail++] = s, prev[s] = s;
        while (head < tail && prev[t] < 0) {
            int u = queue[head++];
            for (int v = 0; v < V; v++)
                if (prev[v] < 0 && r[(size_t)u * V + v] > 0.0) prev[v] = u, queue[tail++] = v;
        }
        if (prev[t] < 0) break;
        double b = INFINITY;
        for (int v = t; v != s; v = prev[v]) b = fmin(b, r[(size_t)prev[v] * V + v]);
        for (int v = t; v != s; v = prev[v]) {
            r[(size_t)prev[v] * V + v] -= b;
            r[(size_t)v * V + prev[v]] += b;
        }
        total += b;
    }
    free(r), free(prev), free(queue);
    return total;
}

/* --- helpers --------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void) { /* xorshift64*, [0, 1) */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* Random capacities of one of three kinds: 0 uniform with a share of zeros, 1 small
 * integers (many equal paths), 2 attention-like (softmax rows / 2 + I / 2). */
static void random_caps(float *cap, int L, int T, int kind) {
    for (int l = 0; l < L; l++)
        for (int i = 0; i < T; i++) {
            float *row = cap + ((size_t)l * T + i) * T;
            double s = 0.0;
            for (int k = 0; k < T; k++) {
                if (kind == 0) row[k] = uniform() < 0.3 ? 0.0f : (float)uniform();
                if (kind == 1) row[k] = (float)(int)(uniform() * 4.0);
                if (kind == 2) s += row[k] = (float)exp(4.0 * uniform());
            }
            if (kind == 2)
                for (int k = 0; k < T; k++) row[k] = (float)(0.5 * row[k] / s + (k == i) * 0.5);
        }
}

/* max |a - b| over n values. */
static double max_diff(const float *a, const double *b, int n) {
    double d = 0.0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* --- errors ---------------------------------------------------------------- */

static void test_errors(void) {
    float cap[2 * 3 * 3], out[3];
    for (int e = 0; e < 18; e++) cap[e] = 0.25f;
    VitError err;
    const VitStatus A = VIT_ERR_ARG;
    check_err(vit_max_flow_layers(NULL, cap, 2, 3, 0, 1, &err), &err, A, NULL,
              (const char *[]){"attention flow", "NULL", NULL}, "out NULL");
    check_err(vit_max_flow_layers(out, NULL, 2, 3, 0, 1, &err), &err, A, NULL,
              (const char *[]){"attention flow", "NULL", NULL}, "cap NULL");
    check_err(vit_max_flow_layers(out, cap, 0, 3, 0, 1, &err), &err, A, NULL,
              (const char *[]){"0 layers", NULL}, "0 layers");
    check_err(vit_max_flow_layers(out, cap, VIT_MAX_LAYERS + 1, 3, 0, 1, &err), &err, A, NULL,
              (const char *[]){"257 layers", NULL}, "257 layers");
    check_err(vit_max_flow_layers(out, cap, 2, 0, 0, 1, &err), &err, A, NULL,
              (const char *[]){"0 tokens", NULL}, "0 tokens");
    check_err(vit_max_flow_layers(out, cap, 2, 3, -1, 1, &err), &err, A, NULL,
              (const char *[]){"query token -1 out of range [0, 3)", NULL}, "query -1");
    check_err(vit_max_flow_layers(out, cap, 2, 3, 3, 1, &err), &err, A, NULL,
              (const char *[]){"query token 3 out of range [0, 3)", NULL}, "query T");
    check_err(vit_max_flow_layers(out, cap, 2, 3, 0, 0, &err), &err, A, NULL,
              (const char *[]){"0 threads", NULL}, "0 threads");
    check_err(vit_max_flow_layers(out, cap, 2, 3, 0, VIT_MAX_THREADS + 1, &err), &err, A, NULL,
              (const char *[]){"257 threads", NULL}, "257 threads");
    const float bad[3] = {NAN, -0.5f, INFINITY};
    const char *what[3] = {"capacity NaN", "capacity -0.5", "capacity inf"};
    for (int b = 0; b < 3; b++) {
        cap[1 * 9 + 2 * 3 + 0] = bad[b];
        check_err(vit_max_flow_layers(out, cap, 2, 3, 0, 1, &err), &err, A, NULL,
                  (const char *[]){"capacity [1][2][0]", "expected finite and >= 0", NULL},
                  what[b]);
    }
    cap[1 * 9 + 2 * 3 + 0] = -0.0f;
    check_err(vit_max_flow_layers(out, cap, 2, 3, 0, 1, &err), &err, VIT_OK, NULL, NULL,
              "capacity -0 (is >= 0)");
    check_err(vit_max_flow_layers(out, cap, 2, 3, 0, 1, NULL), NULL, VIT_OK, NULL, NULL,
              "err NULL");
    check(vit_max_flow_layers(out, cap, 2, 3, 9, 1, NULL) == VIT_ERR_ARG, "err NULL on error");
}

/* --- graphs worked by hand ------------------------------------------------- */

static void expect(const char *what, const float *cap, int L, int T, int q, const double *want) {
    float out[8];
    VitError err;
    for (int threads = 1; threads <= 3; threads += 2) {
        VitStatus rc = vit_max_flow_layers(out, cap, L, T, q, threads, &err);
        double d = rc ? INFINITY : max_diff(out, want, T);
        check(d <= 1e-7, "%s (%d thread%s): got %g .. , expected %g .., max diff %.1e", what,
              threads, threads > 1 ? "s" : "", rc ? -1.0 : (double)out[0], want[0], d);
    }
}

static void test_by_hand(void) {
    /* One layer: the flow is the edge itself, cap[0][q][j]. */
    const float one[9] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};
    expect("one layer, query 1: row 1", one, 1, 3, 1, (const double[]){0.4f, 0.5f, 0.6f});

    /* One token, four layers: a chain, its smallest capacity. */
    const float chain[4] = {0.5f, 0.25f, 0.75f, 1.0f};
    expect("a chain of 4: its minimum", chain, 4, 1, 0, (const double[]){0.25});

    /* Two layers, two tokens, query 0: the two paths (0,j) -> (1,i) -> (2,0) share no
     * edge, so out[j] = min(cap0[0][j], cap1[0][0]) + min(cap0[1][j], cap1[0][1]):
     * j = 0: min(0.5, 0.4) + min(0.3, 0.7) = 0.7; j = 1: min(0.2, 0.4) + min(0.6, 0.7)
     * = 0.8. Row 1 of the top layer leads elsewhere and must not count. */
    const float two[8] = {0.5f, 0.2f, 0.3f, 0.6f, /* cap0[i][j] */
                          0.4f, 0.7f, 0.9f, 0.9f /* cap1[i][j] */};
    expect("2 layers, 2 tokens", two, 2, 2, 0, (const double[]){0.7, 0.8});

    /* Three layers, two tokens, unit capacities, query 0. From (0,0) both (1,0) and
     * (1,1) are reached; (1,0) -> (2,0), (2,1); (1,1) -> (2,0) only; (2,0), (2,1) ->
     * (3,0). Max flow 2: (1,0) -> (2,1) and (1,1) -> (2,0). A first path through
     * (1,0) -> (2,0) leaves (1,1) stuck: the second unit needs the reverse arc
     * (2,0) -> (1,0), i.e. a second Dinic phase. Token 1 has no edge out: 0. */
    const float cancel[12] = {1, 0, 1, 0, /* cap0: (0,0) -> (1,0), (1,1) */
                              1, 1, 1, 0, /* cap1: (1,0) -> (2,0), (2,1); (1,1) -> (2,0) */
                              1, 1, 0, 0 /* cap2: (2,0), (2,1) -> (3,0) */};
    expect("3 layers: a reverse arc needed", cancel, 3, 2, 0, (const double[]){2.0, 0.0});

    /* A layer of zeros cuts every path. */
    float cut[3 * 4];
    for (int e = 0; e < 12; e++) cut[e] = e >= 4 && e < 8 ? 0.0f : 1.0f;
    expect("a zero layer", cut, 3, 2, 1, (const double[]){0.0, 0.0});
}

/* --- the plain max flow against the engine's ------------------------------- */

static void test_random(void) {
    static const int shapes[][2] = {{1, 1}, {1, 5}, {2, 1}, {2, 3}, {3, 4}, {4, 6},
                                    {5, 5}, {6, 7}, {2, 9}, {8, 3}, {3, 12}};
    double worst = 0.0;
    int n = 0, bad_threads = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kind = 0; kind < 3; kind++)
            for (int rep = 0; rep < 2; rep++) {
                int L = shapes[s][0], T = shapes[s][1], q = (int)(uniform() * T);
                float *cap = malloc((size_t)L * T * T * sizeof(float));
                float out[4][16];
                double want[16];
                if (!cap) exit(2);
                random_caps(cap, L, T, kind);
                for (int j = 0; j < T; j++) want[j] = max_flow_naive(cap, L, T, q, j);
                for (int threads = 1; threads <= 4; threads++)
                    if (vit_max_flow_layers(out[threads - 1], cap, L, T, q, threads, NULL))
                        check(0, "random graph L=%d T=%d refused", L, T);
                double scale = 1.0;
                for (int j = 0; j < T; j++) scale = fmax(scale, want[j]);
                double d = max_diff(out[0], want, T) / scale;
                worst = fmax(worst, d);
                if (d > 1e-6) check(0, "L=%d T=%d q=%d kind %d: max diff %.1e", L, T, q, kind, d);
                for (int threads = 2; threads <= 4; threads++)
                    bad_threads += memcmp(out[0], out[threads - 1], (size_t)T * sizeof(float)) != 0;
                n++;
                free(cap);
            }
    check(worst <= 1e-6, "%d random graphs against Edmonds-Karp: max relative diff %.1e", n, worst);
    check(!bad_threads, "the same flows bit for bit on 1, 2, 3 and 4 threads (%d differ)",
          bad_threads);
}

/* --- vit_attention_flow on a tiny model ------------------------------------ */

static void test_model(const char *dir) {
    enum { D = 128, L = 3, P = 8, GRID = 4, F = 128 };
    char path[1024];
    Model m;
    make_dir(dir);
    path_join(path, sizeof path, dir, "tiny.safetensors");
    model_tiny(&m, D, L, P, GRID, F, 0);
    if (!check(model_write(&m, path) == 0, "write %s", path)) return;
    Vit vit = {0};
    VitRun keep = {0}, redo = {0}, none = {0};
    VitError err;
    float *flow = NULL, *flow2 = NULL, *cap = NULL;
    VitRunOptions opt_keep = {.n_threads = 2, .att = VIT_ATT_KEEP},
                  opt_redo = {.n_threads = 2, .att = VIT_ATT_RECOMPUTE};
    if (!check_err(vit_load(&vit, path, NULL, &err), &err, VIT_OK, NULL, NULL, "vit_load") ||
        !check_err(vit_run_init_with(&keep, &vit, &opt_keep, &err), &err, VIT_OK, NULL, NULL,
                   "keep") ||
        !check_err(vit_run_init_with(&redo, &vit, &opt_redo, &err), &err, VIT_OK, NULL, NULL,
                   "redo"))
        goto done;
    const VitConfig *c = &vit.cfg;
    int T = c->n_tokens, H = c->n_heads, Np = c->n_prefix, N = c->n_patches;
    size_t TT = (size_t)T * T, n_in = 3 * (size_t)c->image_h * c->image_w;
    for (size_t i = 0; i < n_in; i++) keep.input[i] = redo.input[i] = (float)sin(0.37 * i);
    vit_forward(&keep, &vit);
    vit_forward(&redo, &vit);
    flow = malloc((size_t)T * sizeof(float));
    flow2 = malloc((size_t)T * sizeof(float));
    cap = malloc((size_t)L * TT * sizeof(float));
    if (!flow || !flow2 || !cap) goto done;

    none.cfg = *c;
    check_err(vit_attention_flow(flow, &none, 0, 0, &err), &err, VIT_ERR_ARG, NULL,
              (const char *[]){"attention flow: no forward pass", NULL}, "no forward pass");
    check_err(vit_attention_flow(flow, &keep, -1, 0, &err), &err, VIT_ERR_ARG, NULL,
              (const char *[]){"attention flow: layer -1 out of range [0, 3)", NULL}, "layer -1");
    check_err(vit_attention_flow(flow, &keep, L, 0, &err), &err, VIT_ERR_ARG, NULL,
              (const char *[]){"layer 3 out of range [0, 3)", NULL}, "layer L");
    check_err(vit_attention_flow(flow, &keep, 0, -1, &err), &err, VIT_ERR_ARG, NULL,
              (const char *[]){"query token -1 out of range [0, 17)", NULL}, "query -1");
    check_err(vit_attention_flow(flow, &keep, 0, T, &err), &err, VIT_ERR_ARG, NULL,
              (const char *[]){"query token 17 out of range [0, 17)", NULL}, "query T");

    /* The capacities by hand from the kept attention, in double:
     * rownorm(0.5 mean_h att + 0.5 I). */
    for (int l = 0; l < L; l++)
        for (int i = 0; i < T; i++) {
            double row[64], s = 0.0;
            for (int k = 0; k < T; k++) {
                double a = 0.0;
                for (int h = 0; h < H; h++) a += keep.att[(((size_t)l * H + h) * T + i) * T + k];
                s += row[k] = 0.5 * a / H + (k == i ? 0.5 : 0.0);
            }
            for (int k = 0; k < T; k++) cap[((size_t)l * T + i) * T + k] = (float)(row[k] / s);
        }
    double worst = 0.0, lo = INFINITY, hi = -INFINITY;
    int same = 1, rollout_same = 1;
    const int queries[3] = {0, Np, T - 1};
    for (int l = 0; l < L; l++)
        for (int qi = 0; qi < 3; qi++) {
            int q = queries[qi];
            float want[64];
            double w64[64];
            if (!check_err(vit_attention_flow(flow, &keep, l, q, &err), &err, VIT_OK, NULL, NULL,
                           "vit_attention_flow, attention kept") ||
                !check_err(vit_attention_flow(flow2, &redo, l, q, &err), &err, VIT_OK, NULL, NULL,
                           "vit_attention_flow, attention recomputed") ||
                vit_max_flow_layers(want, cap, l + 1, T, q, 1, NULL))
                goto done;
            for (int j = 0; j < T; j++) {
                w64[j] = want[j];
                lo = fmin(lo, flow[j]), hi = fmax(hi, flow[j]);
            }
            worst = fmax(worst, max_diff(flow, w64, T));
            same &= !memcmp(flow, flow2, (size_t)T * sizeof(float));
            if (l == 0) { /* one layer: the flow is Â_0[q, j], rollout's row at layer 0 */
                float roll[64];
                if (vit_rollout(roll, &keep, 0, -1, VIT_FUSE_MEAN, 0.0f, q, NULL)) goto done;
                rollout_same &= !memcmp(roll, flow + Np, (size_t)N * sizeof(float));
            }
        }
    check(worst <= 1e-6,
          "flow of the tiny model (T=%d, L=%d, H=%d) against its capacities by "
          "hand: max diff %.1e",
          T, L, H, worst);
    check(lo >= 0.0 && hi <= 1.0 + 1e-6, "flows in [0, 1]: %.3g .. %.3g", lo, hi);
    check(same, "the same flows bit for bit with the attention recomputed");
    check(rollout_same, "after block 0 the flow is vit_rollout's map, bit for bit");
done:
    free(flow), free(flow2), free(cap);
    vit_run_free(&keep);
    vit_run_free(&redo);
    vit_free(&vit);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_flow SCRATCH_DIR\n");
        return 2;
    }
    test_errors();
    test_by_hand();
    test_random();
    test_model(argv[1]);
    return t_finish("test_flow");
}
