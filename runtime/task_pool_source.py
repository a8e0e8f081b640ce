"""The C source of the thread pool parallel loops run on (runtime/task_pool.py builds it).

Kept as a Python string (as runtime/fastcall_source.py keeps its C) so that it ships with
every install of the package: a wheel carries the package's Python files only.
"""

#: How long a worker that ran out of tasks keeps looking for the next one before it
#: sleeps, in ns (see the source's comment).
SPIN_NS = 100_000

SOURCE = r'''/* The async runtime's functions that parallel loops call, on a pool whose workers spin.
 *
 * The code of a parallel loop (lowering/passes/parallel_tasks.py) calls six functions of
 * MLIR's async runtime: the worker count, a token's create / emplace / await / drop, and
 * `Execute` (run a task on a worker). MLIR's runtime puts a task on LLVM's ThreadPool,
 * whose idle workers sleep on a condition variable: every parallel call then waits for a
 * worker to wake, tens of us on a KVM guest, and a program of several parallel loops pays
 * it per loop. Here a worker that runs out of tasks first spins for SPIN_NS (one worker at
 * a time: `spinner`), so the next loop of the program, or the next call, finds it awake;
 * then it sleeps on the condition variable as before. The same symbols as MLIR's library,
 * loaded in its place (never both), so every program binds to whichever the process has:
 * JIT-compiled ones, and the disk cache's shared libraries when they are loaded.
 *
 * Tokens: created with two references (the task's, dropped when it emplaces the token, and
 * the caller's, dropped after it awaited it), as in MLIR's runtime. A task's last step in
 * a program's code is a tail call of Emplace: from there on it runs this library's code
 * only, so the program may be freed while the worker is still returning.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define SPIN_CHECKS 32 /* pause instructions between clock reads and yields */

typedef struct {
    _Atomic int64_t refs;
    _Atomic uint32_t ready; /* a futex word */
} Token;

typedef struct Task {
    struct Task *next;
    void *handle;
    void (*resume)(void *);
} Task;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static Task *head, *tail;      /* the queue, under `lock` */
static int sleepers, started;  /* under `lock` */
static _Atomic int64_t pending; /* tasks queued: read by the spinning worker without the lock */
static _Atomic int spinner;     /* a worker is spinning */
static _Atomic int64_t tasks_run, tasks_spun;
static int64_t workers;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static Task *pop(void) {
    pthread_mutex_lock(&lock);
    Task *t = head;
    if (t) {
        head = t->next;
        if (!head) tail = NULL;
        atomic_fetch_sub_explicit(&pending, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&lock);
    return t;
}

/* Spin until a task is queued or SPIN_NS passed: whether one is. Yields now and then, so a
 * caller sharing this CPU runs on (its next call is what the spin waits for). */
static int spin(void) {
    int64_t end = now_ns() + SPIN_NS;
    for (;;) {
        for (int i = 0; i < SPIN_CHECKS; i++) {
            if (atomic_load_explicit(&pending, memory_order_acquire) > 0) return 1;
            __builtin_ia32_pause();
        }
        if (now_ns() > end) return 0;
        sched_yield();
    }
}

static void *work(void *unused) {
    (void)unused;
    int spun = 0;
    for (;;) {
        Task *t = pop();
        if (t) {
            void *handle = t->handle;
            void (*resume)(void *) = t->resume;
            free(t);
            atomic_fetch_add_explicit(&tasks_run, 1, memory_order_relaxed);
            if (spun) atomic_fetch_add_explicit(&tasks_spun, 1, memory_order_relaxed);
            resume(handle);
            spun = 0;
            continue;
        }
        int idle = 0;
        if (atomic_compare_exchange_strong(&spinner, &idle, 1)) {
            spun = spin();
            atomic_store(&spinner, 0);
            if (spun) continue;
        }
        spun = 0;
        pthread_mutex_lock(&lock);
        while (!head) {
            sleepers++;
            pthread_cond_wait(&wake, &lock);
            sleepers--;
        }
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

/* A forked child has none of the workers: it starts its own on its first task. */
static void after_fork_in_child(void) {
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    head = tail = NULL; /* the parent's queued tasks are not the child's to run */
    sleepers = started = 0;
    atomic_store(&pending, 0);
    atomic_store(&spinner, 0);
}

static void count_workers(void) {
    cpu_set_t set;
    workers = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    if (workers < 1) workers = 1;
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* Under `lock`. Workers block every signal: Python's handlers run on the main thread. */
static void start_workers(void) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int64_t i = 0; i < workers; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, work, NULL) == 0) {
            pthread_detach(thread);
            started++;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

API int64_t mlirAsyncRuntimGetNumWorkerThreads(void) {
    pthread_once(&once, count_workers);
    return workers;
}

API void *mlirAsyncRuntimeCreateToken(void) {
    Token *t = malloc(sizeof *t);
    if (!t) abort();
    atomic_init(&t->refs, 2);
    atomic_init(&t->ready, 0);
    return t;
}

API void mlirAsyncRuntimeDropRef(void *token, int64_t count) {
    Token *t = token;
    if (atomic_fetch_sub_explicit(&t->refs, count, memory_order_acq_rel) == count) free(t);
}

API void mlirAsyncRuntimeEmplaceToken(void *token) {
    Token *t = token;
    atomic_store_explicit(&t->ready, 1, memory_order_release);
    syscall(SYS_futex, &t->ready, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
    mlirAsyncRuntimeDropRef(t, 1);
}

API void mlirAsyncRuntimeAwaitToken(void *token) {
    Token *t = token;
    while (!atomic_load_explicit(&t->ready, memory_order_acquire))
        syscall(SYS_futex, &t->ready, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

API void mlirAsyncRuntimeExecute(void *handle, void (*resume)(void *)) {
    pthread_once(&once, count_workers);
    Task *t = malloc(sizeof *t);
    if (!t) abort();
    t->next = NULL;
    t->handle = handle;
    t->resume = resume;
    pthread_mutex_lock(&lock);
    if (!started) start_workers();
    if (!started) { /* no thread could be made: the caller's thread runs it */
        pthread_mutex_unlock(&lock);
        free(t);
        resume(handle);
        return;
    }
    if (tail) tail->next = t; else head = t;
    tail = t;
    int64_t queued = atomic_fetch_add_explicit(&pending, 1, memory_order_release) + 1;
    /* The spinning worker takes one task; any more, or none spinning, wake a sleeper. */
    if (sleepers > 0 && (queued > 1 || !atomic_load(&spinner))) pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

/* For tests: tasks run, and of them those a worker found while spinning. */
API int64_t xlamlir_task_pool_tasks_run(void) { return atomic_load(&tasks_run); }
API int64_t xlamlir_task_pool_tasks_spun(void) { return atomic_load(&tasks_spun); }
'''
