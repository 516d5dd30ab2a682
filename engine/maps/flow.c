/* flow.c - attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in
 * Transformers", §3): the maximum flow through the layered graph of a ViT's
 * attention, from every input token to one token after a given block.
 *
 * The graph. Level 0 holds the input tokens, level l + 1 the tokens after block l;
 * an edge from token j at level l to token i at level l + 1 has capacity
 * cap[l][i][j] (the attention of i to j, with the residual). The paper's code
 * (samiraabnar/attention_flow, get_adjmat / compute_flows) builds the same edges
 * pointing down, from level l + 1 to level l, and asks networkx for the flow from
 * the output node to each input node; a max flow does not change when every edge is
 * reversed, and so it is solved here: source (n_layers, query), sink (0, j), arcs
 * going down with capacities cap[l][i][.], one contiguous row per node. Only the
 * sink of level 0 and the source of the top level take part: the other level-0
 * nodes have no way on, the other top-level nodes no way in.
 *
 * The algorithm: Dinic's (blocking flows along BFS levels from the source), in
 * double, with current arcs and dead ends pruned. Why Dinic: the graph is a stack of
 * dense bipartite layers with every capacity > 0, and the first blocking flow, along
 * the straight-down paths, carries most or all of the max flow. Measured on
 * DeiT-Tiny's attention over the shared photos (T = 197): for the CLS token after
 * the last block the second BFS finds no path for any input token, so a problem
 * costs about one scan of its L*T^2 arcs (0.5 ms); after block 3 (coffee.png), 1.7
 * phases on average for the CLS token and 4 to 5 (at most 12) for patch tokens 50
 * and 196. Dinic's bound holds for any graph: at most (L + 1)*T phases. Push-relabel
 * would scan the same dense rows at every relabel, with more bookkeeping; when one
 * phase does the work, Dinic is the simpler choice. The T problems (one per input
 * token) share the capacities read-only and are handed out to the threads one at a
 * time; each thread keeps its own flows [L, T, T] (double) and zeroes only the rows
 * a problem wrote.
 *
 * Exactness: an augmentation that fills an arc sets its flow to the capacity (or 0
 * for a reverse arc) exactly, so a filled arc has residual 0, not a rounding
 * remainder that would feed endless tiny augmentations; the other flows are sums of
 * doubles. The result is the max flow of the given float capacities up to the
 * rounding of those double sums, far below float's, and is returned as float. */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* --- one max-flow problem -------------------------------------------------- */

typedef struct {
    const float *cap; /* [L, T, T] cap[l][i][k]: token k at level l -> token i at level l + 1 */
    int L, T, query;  /* levels 0 .. L; the source is (L, query) */
} Graph;

/* One thread's workspace, one allocation. Node (l, i) is l*T + i; its arcs a = 0 ..
 * 2T - 1: a < T down to (l - 1, a), capacity cap[l - 1][i][a]; a >= T the reverse of
 * the arc from (l + 1, a - T) down to it, residual that arc's flow. */
typedef struct {
    double *f;    /* [L, T, T] f[l][i][k]: flow on the arc (l + 1, i) -> (l, k); node
                     (l, k)'s reverse arcs read column k */
    double *res;  /* [V] residuals along the DFS path */
    size_t *arc;  /* [V] the path's arcs: index of the arc's flow in f (and capacity in cap) */
    int *row;     /* [V] arc[d] / T: its row of f */
    int *path;    /* [V + 1] nodes of the DFS path, source first */
    int *level;   /* [V + 1] their levels */
    int *dist;    /* [V] BFS level from the source, -1 unreached or dead end */
    int *cur;     /* [V] current arc of each node in a blocking flow */
    int *queue;   /* [V] BFS queue */
    int *left;    /* [L + 1] nodes of each level not yet reached by the BFS */
    int *top;     /* [L + 1] the largest BFS level given to a node of each level: arcs into
                     a level whose nodes are all nearer the source are not admissible */
    int *dirty;   /* [L T] rows of f a problem wrote */
    uint8_t *rev; /* [V] 1: path arc d is the reverse of f[arc[d]] */
    uint8_t *hit; /* [L T] whether a row is in dirty */
    int n_dirty;
    void *mem;
} Work;

/* Carve the workspace out of one zeroed allocation, largest elements first so that
 * every part stays aligned. 0 when out of memory. */
static int work_init(Work *w, int L, int T) {
    size_t LTT = (size_t)L * T * T, V = (size_t)(L + 1) * T, LT = (size_t)L * T;
    if (LTT > SIZE_MAX / 32) return 0;
    size_t bytes = (LTT + V) * sizeof(double) + V * sizeof(size_t) +
                   (V + 2 * (V + 1) + 3 * V + 2 * ((size_t)L + 1) + LT) * sizeof(int) + V + LT;
    memset(w, 0, sizeof *w);
    char *p = w->mem = calloc(1, bytes);
    if (!p) return 0;
#define CARVE(field, n) (w->field = (void *)p, p += (n) * sizeof *w->field)
    CARVE(f, LTT), CARVE(res, V), CARVE(arc, V), CARVE(row, V), CARVE(path, V + 1);
    CARVE(level, V + 1), CARVE(dist, V), CARVE(cur, V), CARVE(queue, V);
    CARVE(left, (size_t)L + 1), CARVE(top, (size_t)L + 1), CARVE(dirty, LT), CARVE(rev, V);
    CARVE(hit, LT);
#undef CARVE
    return 1;
}

/* Zero the rows of f the last problem wrote. */
static void work_reset(Work *w, int T) {
    for (int d = 0; d < w->n_dirty; d++) {
        size_t r = (size_t)w->dirty[d];
        memset(w->f + r * T, 0, (size_t)T * sizeof(double));
        w->hit[r] = 0;
    }
    w->n_dirty = 0;
}

static void mark(Work *w, size_t r) {
    if (!w->hit[r]) w->hit[r] = 1, w->dirty[w->n_dirty++] = (int)r;
}

/* The arcs of a node at level l, as ranges of a: down [d0, d1), up [T + u0, T + u1).
 * Level 1 goes down to the sink's token only, level L - 1 up to the source only. */
typedef struct {
    int d0, d1, u0, u1;
} Arcs;

static Arcs arcs_of(const Graph *g, int l, int sink_tok) {
    Arcs r = {0, 0, 0, 0};
    if (l >= 2) r.d0 = 0, r.d1 = g->T;
    if (l == 1) r.d0 = sink_tok, r.d1 = sink_tok + 1;
    if (l <= g->L - 2) r.u0 = 0, r.u1 = g->T;
    if (l == g->L - 1) r.u0 = g->query, r.u1 = g->query + 1;
    return r;
}

/* BFS levels from the source over arcs with residual > 0; 1 if the sink is reached.
 * Once a level has no unreached node left, its arcs are no longer scanned. */
static int bfs(Work *w, const Graph *g, int s, int t) {
    int T = g->T, L = g->L, V = (L + 1) * T, head = 0, tail = 0, sink_tok = t % T;
    for (int v = 0; v < V; v++) w->dist[v] = -1;
    for (int l = 0; l <= L; l++) w->left[l] = T, w->top[l] = -1;
    w->left[0] = 1, w->left[L] = 0, w->top[L] = 0;
    w->dist[s] = 0, w->cur[s] = 0, w->queue[tail++] = s;
    while (head < tail) {
        int u = w->queue[head++], l = u / T, i = u % T, du = w->dist[u];
        if (w->dist[t] >= 0 && du >= w->dist[t]) break;
        Arcs r = arcs_of(g, l, sink_tok);
        if (r.d0 < r.d1 && w->left[l - 1] > 0) {
            int *dl = w->dist + (l - 1) * T;
            size_t o = ((size_t)(l - 1) * T + i) * T;
            const float *c = g->cap + o;
            const double *f = w->f + o;
            for (int k = r.d0; k < r.d1; k++)
                if (dl[k] < 0 && (double)c[k] - f[k] > 0.0) {
                    dl[k] = du + 1, w->cur[(l - 1) * T + k] = 0;
                    w->queue[tail++] = (l - 1) * T + k;
                    w->left[l - 1]--, w->top[l - 1] = du + 1;
                }
        }
        if (r.u0 < r.u1 && w->left[l + 1] > 0) {
            int *dl = w->dist + (l + 1) * T;
            const double *fc = w->f + (size_t)l * T * T + i; /* column i, stride T */
            for (int m = r.u0; m < r.u1; m++)
                if (dl[m] < 0 && fc[(size_t)m * T] > 0.0) {
                    dl[m] = du + 1, w->cur[(l + 1) * T + m] = 0;
                    w->queue[tail++] = (l + 1) * T + m;
                    w->left[l + 1]--, w->top[l + 1] = du + 1;
                }
        }
    }
    return w->dist[t] >= 0;
}

/* Next admissible arc of u = (l, i) from cur[u] (residual > 0, to a node one BFS
 * level further), or -1; cur[u] is left on it. */
static int advance(Work *w, const Graph *g, int u, int l, int sink_tok) {
    int T = g->T, i = u - l * T, want = w->dist[u] + 1;
    Arcs r = arcs_of(g, l, sink_tok);
    int a = w->cur[u];
    if (a < r.d0) a = r.d0;
    if (a < r.d1 && w->top[l - 1] >= want) {
        const int *dl = w->dist + (l - 1) * T;
        size_t o = ((size_t)(l - 1) * T + i) * T;
        const float *c = g->cap + o;
        const double *f = w->f + o;
        for (; a < r.d1; a++)
            if (dl[a] == want && (double)c[a] - f[a] > 0.0) return w->cur[u] = a;
        a = T + r.u0;
    }
    int m = a - T < r.u0 ? r.u0 : a - T;
    if (m < r.u1 && w->top[l + 1] >= want) {
        const int *dl = w->dist + (l + 1) * T;
        const double *fc = w->f + (size_t)l * T * T + i; /* column i, stride T */
        for (; m < r.u1; m++)
            if (dl[m] == want && fc[(size_t)m * T] > 0.0) return w->cur[u] = T + m;
    }
    w->cur[u] = 2 * T;
    return -1;
}

/* One blocking flow on the BFS levels (current arcs, dead ends pruned); its value.
 * An augmentation fills its bottleneck arcs exactly: flow = capacity, or 0 on a
 * reverse arc. */
static double blocking_flow(Work *w, const Graph *g, int s, int t) {
    size_t T = (size_t)g->T;
    int depth = 0, sink_tok = t % g->T;
    double total = 0.0;
    w->path[0] = s, w->level[0] = g->L;
    for (;;) {
        int u = w->path[depth], l = w->level[depth];
        if (u == t) {
            double b = INFINITY;
            for (int d = 0; d < depth; d++) {
                size_t o = w->arc[d];
                w->res[d] = w->rev[d] ? w->f[o] : (double)g->cap[o] - w->f[o];
                if (w->res[d] < b) b = w->res[d];
            }
            int first = -1;
            for (int d = 0; d < depth; d++) {
                size_t o = w->arc[d];
                int full = w->res[d] <= b;
                if (w->rev[d])
                    w->f[o] = full ? 0.0 : w->f[o] - b;
                else
                    w->f[o] = full ? (double)g->cap[o] : w->f[o] + b;
                mark(w, (size_t)w->row[d]);
                if (full && first < 0) first = d;
            }
            total += b;
            depth = first; /* back to the tail of the first filled arc */
            continue;
        }
        int a = advance(w, g, u, l, sink_tok);
        if (a >= 0) {
            size_t i = (size_t)(u - l * g->T);
            if (a < g->T) { /* down to (l - 1, a): f[l - 1][i][a] */
                w->row[depth] = (l - 1) * g->T + (int)i, w->rev[depth] = 0;
                w->arc[depth] = (size_t)w->row[depth] * T + (size_t)a;
                w->path[depth + 1] = (l - 1) * g->T + a, w->level[depth + 1] = l - 1;
            } else { /* up to (l + 1, m), against f[l][m][i] */
                size_t m = (size_t)(a - g->T);
                w->row[depth] = l * g->T + (int)m, w->rev[depth] = 1;
                w->arc[depth] = (size_t)w->row[depth] * T + i;
                w->path[depth + 1] = (l + 1) * g->T + (int)m, w->level[depth + 1] = l + 1;
            }
            depth++;
        } else {
            w->dist[u] = -1; /* a dead end for the rest of this phase */
            if (depth == 0) break;
            depth--;
            w->cur[w->path[depth]]++;
        }
    }
    return total;
}

/* Max flow from token j at level 0 to the query at level L. */
static double max_flow(Work *w, const Graph *g, int j) {
    int T = g->T, s = g->L * T + g->query, t = j;
    double total = 0.0;
    work_reset(w, T);
    while (bfs(w, g, s, t)) total += blocking_flow(w, g, s, t);
    return total;
}

/* --- threads --------------------------------------------------------------- */

typedef struct {
    const Graph *g;
    float *out;       /* [T] */
    atomic_int *next; /* the next input token to solve */
    VitControl *ctl;  /* cancelled: the tokens left are skipped; progress: tokens taken */
    Work w;
} Worker;

static void *solve_tokens(void *arg) {
    Worker *k = arg;
    for (;;) {
        int j = atomic_fetch_add(k->next, 1);
        if (j >= k->g->T || (k->ctl && vit_control_cancelled(k->ctl))) break;
        if (k->ctl) vit_control_report(k->ctl, j, k->g->T);
        k->out[j] = (float)max_flow(&k->w, k->g, j);
    }
    return NULL;
}

/* --- entry points ---------------------------------------------------------- */

/* vit_max_flow_layers, stopped early when ctl (may be NULL) is cancelled. */
static VitStatus max_flow_layers(float *out, const float *cap, int n_layers, int T, int query,
                                 int n_threads, VitControl *ctl, VitError *err) {
    if (!out || !cap) return vit_set_error(err, VIT_ERR_ARG, "attention flow: NULL array");
    if (n_layers < 1 || n_layers > VIT_MAX_LAYERS)
        return vit_set_error(err, VIT_ERR_ARG, "attention flow: %d layers, expected 1 .. %d",
                             n_layers, VIT_MAX_LAYERS);
    if (T < 1 || T > VIT_MAX_TOKENS)
        return vit_set_error(err, VIT_ERR_ARG, "attention flow: %d tokens, expected 1 .. %d", T,
                             VIT_MAX_TOKENS);
    if (query < 0 || query >= T)
        return vit_set_error(err, VIT_ERR_ARG,
                             "attention flow: query token %d out of range [0, %d)", query, T);
    if (n_threads < 1 || n_threads > VIT_MAX_THREADS)
        return vit_set_error(err, VIT_ERR_ARG, "attention flow: %d threads, expected 1 .. %d",
                             n_threads, VIT_MAX_THREADS);
    size_t TT = (size_t)T * T, n_cap = (size_t)n_layers * TT;
    for (size_t e = 0; e < n_cap; e++)
        if (!(cap[e] >= 0.0f) || !isfinite(cap[e])) {
            size_t l = e / TT, i = e % TT / T, j = e % T;
            return vit_set_error(err, VIT_ERR_ARG,
                                 "attention flow: capacity [%zu][%zu][%zu] = %g, expected finite "
                                 "and >= 0",
                                 l, i, j, (double)cap[e]);
        }

    Graph g = {cap, n_layers, T, query};
    int n = n_threads < T ? n_threads : T, started = 0;
    atomic_int next = 0;
    Worker *k = calloc((size_t)n, sizeof *k);
    pthread_t *tid = n > 1 ? calloc((size_t)n - 1, sizeof *tid) : NULL;
    if (!k || (n > 1 && !tid)) {
        free(k), free(tid);
        return vit_set_error(err, VIT_ERR_NOMEM, "attention flow: out of memory");
    }
    /* A thread whose workspace cannot be allocated or that cannot start is left
     * out: the others, the caller's included, solve its tokens. */
    int n_work = 0;
    while (n_work < n && work_init(&k[n_work].w, n_layers, T)) n_work++;
    if (n_work == 0) {
        free(k), free(tid);
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "attention flow: out of memory for [%d, %d, %d] doubles", n_layers, T,
                             T);
    }
    for (int t = 0; t < n_work; t++) k[t].g = &g, k[t].out = out, k[t].next = &next, k[t].ctl = ctl;
    for (int t = 1; t < n_work; t++) {
        if (pthread_create(&tid[started], NULL, solve_tokens, &k[t])) break;
        started++;
    }
    solve_tokens(&k[0]);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    for (int t = 0; t < n_work; t++) free(k[t].w.mem);
    free(k), free(tid);
    if (ctl && vit_control_cancelled(ctl)) return vit_cancelled_error(err, "attention flow");
    return VIT_OK;
}

VitStatus vit_max_flow_layers(float *out, const float *cap, int n_layers, int T, int query,
                              int n_threads, VitError *err) {
    return max_flow_layers(out, cap, n_layers, T, query, n_threads, NULL, err);
}

VitStatus vit_attention_flow(float *out, const VitRun *run, int layer, int query, VitError *err) {
    const VitConfig *c = &run->cfg;
    if (!run->att && !run->qk)
        return vit_set_error(err, VIT_ERR_ARG, "attention flow: no forward pass has been run");
    if (layer < 0 || layer >= c->n_layers)
        return vit_set_error(err, VIT_ERR_ARG, "attention flow: layer %d out of range [0, %d)",
                             layer, c->n_layers);
    if (query < 0 || query >= c->n_tokens)
        return vit_set_error(err, VIT_ERR_ARG,
                             "attention flow: query token %d out of range [0, %d)", query,
                             c->n_tokens);
    int T = c->n_tokens, L = layer + 1;
    size_t TT = (size_t)T * T;
    AttReader rd;
    VitStatus rc = vit_att_reader_init(&rd, run, err);
    if (rc) return rc;
    float *cap = malloc((size_t)L * TT * sizeof(float));
    if (!cap) {
        vit_att_reader_free(&rd);
        return vit_set_error(err, VIT_ERR_NOMEM, "attention flow: out of memory for [%d, %d, %d]",
                             L, T, T);
    }
    /* The capacities are rollout's Â_l with mean fusion and no discard: the
     * paper's code adds I and renormalises the rows, which for the mean's rows
     * (summing to 1) is 0.5 A + 0.5 I up to float rounding. */
    for (int l = 0; l < L && !vit_cancelled(run); l++) {
        vit_report(run, l, L);
        vit_fuse_heads(cap + (size_t)l * TT, &rd, l, VIT_FUSE_MEAN);
        vit_add_identity_rownorm(cap + (size_t)l * TT, T);
    }
    vit_att_reader_free(&rd);
    if (vit_cancelled(run)) {
        free(cap);
        return vit_cancelled_error(err, "attention flow");
    }
    rc = max_flow_layers(out, cap, L, T, query, run->n_threads > 0 ? run->n_threads : 1,
                         run->control, err);
    free(cap);
    return rc;
}
