/* pool.c - the engine's one thread pool: n - 1 workers and the calling thread run
 * a task together and return when all are done.
 *
 * Why its own pool: the forward pass alternates GEMMs with short row-wise steps
 * (LayerNorm, softmax, GELU). Left to OpenBLAS's threads for the GEMMs and another
 * pool for the rest, two sets of threads would wait for work at once, and idle
 * OpenBLAS threads yield-spin for about 0.1 s after each GEMM: the two fight over
 * the cores (PyTorch at 2 threads: 166 ms -> 460 ms for ViT-B/16 unless
 * OMP_WAIT_POLICY=PASSIVE). So OpenBLAS runs single-threaded inside the tasks
 * (vit_run_init sets openblas_set_num_threads(1)) and this pool is the only one.
 *
 * Waiting: a worker between tasks first spins briefly (the next task of a forward
 * pass comes within microseconds), then yields, then sleeps on a condition
 * variable, so an idle pool costs nothing and a busy machine gets its cores back.
 * The caller waits for the workers the same way. */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

enum {
    SPIN_PAUSES = 4000, /* ~20-40 us of pause instructions */
    SPIN_YIELDS = 200   /* then sched_yield: lets other processes run */
};

struct VitPool {
    int n_threads; /* including the caller */
    pthread_t *workers;
    int n_started;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    atomic_uint gen;     /* incremented per task */
    atomic_int pending;  /* workers still running the current task */
    atomic_int sleepers; /* workers (or the caller) blocked on a condition */
    atomic_int quit;
    VitTask fn;
    void *ctx;
};

typedef struct {
    VitPool *pool;
    int index;
} WorkerArg;

/* Wait until *gen differs from seen (or quit): spin, yield, then sleep. */
static void wait_task(VitPool *p, unsigned seen) {
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen || atomic_load(&p->quit))
            return;
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    /* seq_cst, with the caller's increment of gen and read of sleepers: either it
     * sees this sleeper and broadcasts, or this check sees its new gen */
    while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
}

static void *worker_main(void *arg) {
    WorkerArg wa = *(WorkerArg *)arg;
    free(arg);
    VitPool *p = wa.pool;
    unsigned seen = 0;
    for (;;) {
        wait_task(p, seen);
        if (atomic_load(&p->quit)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        p->fn(p->ctx, wa.index, p->n_threads);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->lock); /* the caller may be asleep on done */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

VitPool *vit_pool_new(int n_threads) {
    VitPool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    if (pthread_mutex_init(&p->lock, NULL)) {
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->wake, NULL) || pthread_cond_init(&p->done, NULL)) goto fail;
    if (p->n_threads > 1) {
        p->workers = calloc((size_t)p->n_threads - 1, sizeof *p->workers);
        if (!p->workers) goto fail;
        for (int i = 1; i < p->n_threads; i++) {
            WorkerArg *wa = malloc(sizeof *wa);
            if (!wa) goto fail;
            *wa = (WorkerArg){p, i};
            if (pthread_create(&p->workers[i - 1], NULL, worker_main, wa)) {
                free(wa);
                goto fail;
            }
            p->n_started++;
        }
    }
    return p;
fail:
    vit_pool_free(p);
    return NULL;
}

void vit_pool_free(VitPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void vit_pool_run(VitPool *p, VitTask fn, void *ctx) {
    if (!p || p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers)) { /* a worker asleep, or about to check gen under the lock */
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    fn(ctx, 0, p->n_threads);
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_lock(&p->lock);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
