/* pool.c - the engine's one thread pool: n - 1 workers and the calling thread share
 * a task's items and return when all are done.
 *
 * Why its own pool: the forward pass alternates GEMMs with short row-wise steps
 * (LayerNorm, softmax, GELU). Left to OpenBLAS's threads for the GEMMs and another
 * pool for the rest, two sets of threads would wait for work at once, and idle
 * OpenBLAS threads yield-spin for about 0.1 s after each GEMM: the two fight over
 * the cores (PyTorch at 2 threads: 166 ms -> 460 ms for ViT-B/16 unless
 * OMP_WAIT_POLICY=PASSIVE). So OpenBLAS runs single-threaded inside the tasks
 * (vit_pool_new calls vit_blas_setup, blas.c) and this pool is the only one.
 *
 * Items, not shares: a task is n_items independent items, and every thread that is
 * running takes the next one until none is left. What an item computes depends on
 * its index alone, never on the thread that runs it, so the numbers do not depend on
 * the scheduling. The caller starts on the items at once; a worker joins when it
 * wakes. On a machine whose cores are busy with other work a worker may not run for
 * milliseconds: the caller then does every item itself and returns, and waits only
 * for workers that joined and are still inside an item (before this, every task
 * waited for every worker to be scheduled, and a forward pass at 2 threads on a loaded
 * 2-core machine took longer than at 1 thread).
 *
 * Joining: a worker counts itself in `active`, then checks `open`; the caller clears
 * `open` when no item is left, then waits for `active` to drop to 0. Both sides use
 * sequentially consistent operations, so either the worker sees the task closed and
 * leaves without touching it, or the caller sees the worker and waits for it. While a
 * worker is active the task cannot end, so its fields stay valid.
 *
 * Waiting: a worker between tasks first spins briefly (the next task of a forward
 * pass comes within microseconds), then yields, then sleeps on a condition
 * variable, so an idle pool costs nothing and a busy machine gets its cores back.
 * The caller waits for active workers the same way. */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

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
    atomic_uint gen;           /* incremented per task: wakes the workers */
    atomic_int open;           /* 1 while the current task takes workers in */
    atomic_int active;         /* workers inside the current task */
    atomic_int next;           /* the next item to take */
    atomic_int sleepers;       /* workers blocked on wake */
    atomic_int caller_waiting; /* the caller blocked on done */
    atomic_int quit;
    VitTask fn; /* the current task: written before open is set, read after */
    void *ctx;
    int n_items;
};

typedef struct {
    VitPool *pool;
    int index;
} WorkerArg;

/* Take and run items until none is left. */
static void run_items(VitPool *p, int thread) {
    for (;;) {
        int item = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (item >= p->n_items) return;
        p->fn(p->ctx, item, p->n_items, thread);
    }
}

/* Wait until *gen differs from seen (or quit): spin, yield, then sleep. */
static void wait_task(VitPool *p, unsigned seen) {
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (atomic_load_explicit(&p->gen, memory_order_relaxed) != seen || atomic_load(&p->quit))
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
#if defined(__linux__) /* seen by name in top -H, gdb and perf; tests/gui/test_fork.py */
    prctl(PR_SET_NAME, "vitlens-pool", 0, 0, 0);
#endif
    unsigned seen = 0;
    for (;;) {
        wait_task(p, seen);
        if (atomic_load(&p->quit)) break;
        seen = atomic_load(&p->gen);
        atomic_fetch_add(&p->active, 1);
        if (atomic_load(&p->open)) run_items(p, wa.index);
        if (atomic_fetch_sub(&p->active, 1) == 1 && atomic_load(&p->caller_waiting)) {
            pthread_mutex_lock(&p->lock); /* the caller is asleep on done, or about to be */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

VitPool *vit_pool_new(int n_threads) {
    vit_blas_setup();
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

int vit_pool_threads(const VitPool *p) {
    return p ? p->n_threads : 1;
}

void vit_pool_run(VitPool *p, VitTask fn, void *ctx, int n_items) {
    if (n_items <= 0) return;
    if (!p || p->n_threads == 1 || n_items == 1) {
        for (int i = 0; i < n_items; i++) fn(ctx, i, n_items, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store(&p->open, 1); /* publishes fn, ctx, n_items and next to joining workers */
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers)) { /* a worker asleep, or about to check gen under the lock */
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    run_items(p, 0);
    atomic_store(&p->open, 0); /* no item left: workers that have not joined stay out */
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (atomic_load(&p->active) == 0) return;
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->caller_waiting, 1);
    while (atomic_load(&p->active) != 0) pthread_cond_wait(&p->done, &p->lock);
    atomic_store(&p->caller_waiting, 0);
    pthread_mutex_unlock(&p->lock);
}
