/* thinkgate's CPU bitmask kernel: set every logit whose token the bitmask forbids to -inf, in place.

   Built at install time as the extension thinkgate.kernels._cpu_bitmask (setup.py; the module init
   is in cpu_bitmask_module.c), or, when no prebuilt one is there, at first use with the system
   compiler (kernels/cpu_bitmask.py); both use the flags of kernels/cpu_build.py. Called through
   ctypes, which releases the GIL. kernels/reference.py is its executable contract. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_TOKENS 32768
/* The flags stay portable (kernels/cpu_build.py); the row loops are also compiled for AVX2 and
   AVX-512 and picked at load time (an ifunc), so a row that is in cache is stored with the same
   vector width as torch's own fill_ uses. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif
#define BLOCK_WORDS 8
#define MAX_THREADS 256
#ifndef SPIN_NS
#define SPIN_NS 50000
#endif

/* Tokens [a, b) of one row (a % 32 == 0). Tokens below `limit` follow their bit; the rest are
   set to `neg` (the -inf bit pattern of the element type). Blocks of 8 words (256 tokens) that
   are all ones or all zeros take one branch; fixed-size fills compile to straight vector stores. */
#define DEFINE_RANGE(NAME, T)                                                          \
static inline void NAME##_word(T *p, uint32_t m, T neg) {                              \
    if (m == 0xFFFFFFFFu) return;                                                      \
    if (m == 0u) { for (int k = 0; k < 32; k++) p[k] = neg; return; }                  \
    uint32_t z = ~m;                                                                   \
    if (__builtin_popcount(z) > 8) {                                                   \
        for (int k = 0; k < 32; k++) p[k] = ((m >> k) & 1u) ? p[k] : neg;              \
        return;                                                                        \
    }                                                                                  \
    while (z) { p[__builtin_ctz(z)] = neg; z &= z - 1u; }                              \
}                                                                                      \
CLONES static void NAME(T *row, const uint32_t *mask, int64_t a, int64_t b, int64_t limit, T neg) { \
    int64_t bit_end = b < limit ? b : limit;                                           \
    int64_t t = a;                                                                     \
    while (t + 32 * BLOCK_WORDS <= bit_end) {                                          \
        uint32_t w[BLOCK_WORDS];                                                       \
        memcpy(w, mask + (t >> 5), sizeof w);                                          \
        uint32_t all = 0xFFFFFFFFu, any = 0u;                                          \
        for (int q = 0; q < BLOCK_WORDS; q++) { all &= w[q]; any |= w[q]; }            \
        T *p = row + t;                                                                \
        if (all != 0xFFFFFFFFu) {                                                      \
            if (any == 0u) {                                                           \
                for (int k = 0; k < 32 * BLOCK_WORDS; k++) p[k] = neg;                 \
            } else {                                                                   \
                for (int q = 0; q < BLOCK_WORDS; q++) NAME##_word(p + 32 * q, w[q], neg); \
            }                                                                          \
        }                                                                              \
        t += 32 * BLOCK_WORDS;                                                         \
    }                                                                                  \
    for (; t + 32 <= bit_end; t += 32) NAME##_word(row + t, mask[t >> 5], neg);        \
    if (t < bit_end) {                                                                 \
        uint32_t m = mask[t >> 5];                                                     \
        for (int64_t k = t; k < bit_end; k++)                                          \
            if (!((m >> (k - t)) & 1u)) row[k] = neg;                                  \
    }                                                                                  \
    int64_t k0 = bit_end > a ? bit_end : a;                                            \
    T *p = row + k0;                                                                   \
    int64_t n = b - k0;                                                                \
    for (int64_t k = 0; k < n; k++) p[k] = neg;                                        \
}

DEFINE_RANGE(range_u32, uint32_t)
DEFINE_RANGE(range_u16, uint16_t)

/* With AVX-512BW (picked at run time; the flags stay portable) a word's 32 tokens are one or two
   masked stores whose mask is the word's zero bits: no branch per word, no read of the logits, only
   the blocked columns written. Same contract and block structure as the generic loops above. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#define HAVE_AVX512 1

__attribute__((target("avx512f,avx512bw")))
static void range_u16_avx512(uint16_t *row, const uint32_t *mask, int64_t a, int64_t b, int64_t limit, uint16_t neg) {
    const __m512i v = _mm512_set1_epi16((short)neg);
    int64_t bit_end = b < limit ? b : limit;
    int64_t t = a;
    for (; t + 32 * BLOCK_WORDS <= bit_end; t += 32 * BLOCK_WORDS) {
        const uint32_t *w = mask + (t >> 5);
        uint32_t all = 0xFFFFFFFFu;
        for (int q = 0; q < BLOCK_WORDS; q++) all &= w[q];
        if (all == 0xFFFFFFFFu) continue;
        for (int q = 0; q < BLOCK_WORDS; q++)
            _mm512_mask_storeu_epi16(row + t + 32 * q, (__mmask32)~w[q], v);
    }
    for (; t + 32 <= bit_end; t += 32) _mm512_mask_storeu_epi16(row + t, (__mmask32)~mask[t >> 5], v);
    if (t < bit_end) {
        uint32_t below = (1u << (bit_end - t)) - 1u;   /* bit_end - t < 32 */
        _mm512_mask_storeu_epi16(row + t, (__mmask32)(~mask[t >> 5] & below), v);
    }
    int64_t k = bit_end > a ? bit_end : a;
    for (; k + 32 <= b; k += 32) _mm512_storeu_si512((void *)(row + k), v);
    if (k < b) _mm512_mask_storeu_epi16(row + k, (__mmask32)((1u << (b - k)) - 1u), v);
}

__attribute__((target("avx512f,avx512bw")))
static void range_u32_avx512(uint32_t *row, const uint32_t *mask, int64_t a, int64_t b, int64_t limit, uint32_t neg) {
    const __m512i v = _mm512_set1_epi32((int)neg);
    int64_t bit_end = b < limit ? b : limit;
    int64_t t = a;
    for (; t + 32 * BLOCK_WORDS <= bit_end; t += 32 * BLOCK_WORDS) {
        const uint32_t *w = mask + (t >> 5);
        uint32_t all = 0xFFFFFFFFu;
        for (int q = 0; q < BLOCK_WORDS; q++) all &= w[q];
        if (all == 0xFFFFFFFFu) continue;
        for (int q = 0; q < BLOCK_WORDS; q++) {
            uint32_t z = ~w[q];
            _mm512_mask_storeu_epi32(row + t + 32 * q, (__mmask16)(z & 0xFFFFu), v);
            _mm512_mask_storeu_epi32(row + t + 32 * q + 16, (__mmask16)(z >> 16), v);
        }
    }
    for (; t + 32 <= bit_end; t += 32) {
        uint32_t z = ~mask[t >> 5];
        _mm512_mask_storeu_epi32(row + t, (__mmask16)(z & 0xFFFFu), v);
        _mm512_mask_storeu_epi32(row + t + 16, (__mmask16)(z >> 16), v);
    }
    if (t < bit_end) {
        uint32_t z = ~mask[t >> 5] & ((1u << (bit_end - t)) - 1u);
        _mm512_mask_storeu_epi32(row + t, (__mmask16)(z & 0xFFFFu), v);
        _mm512_mask_storeu_epi32(row + t + 16, (__mmask16)(z >> 16), v);
    }
    int64_t k = bit_end > a ? bit_end : a;
    for (; k + 16 <= b; k += 16) _mm512_storeu_si512((void *)(row + k), v);
    if (k < b) _mm512_mask_storeu_epi32(row + k, (__mmask16)((1u << (b - k)) - 1u), v);
}

static int g_avx512 = -1;  /* -1: not asked yet */

static int use_avx512(void) {
    int v = __atomic_load_n(&g_avx512, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && !getenv("THINKGATE_NO_AVX512");
        __atomic_store_n(&g_avx512, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

typedef struct {
    char *logits;
    int64_t row_stride;      /* elements */
    int64_t width;           /* logits columns */
    const char *bitmask;
    int64_t mask_stride;     /* int32 words */
    const int64_t *rows;     /* logits row of each bitmask row; NULL: row i */
    int64_t limit;           /* min(vocab_size, 32 * words) */
    int32_t elem_size;       /* 2 or 4 */
    uint32_t neg;            /* -inf bit pattern */
    int64_t chunks_per_row;
    int64_t n_items;
} job_t;

static void run_item(const job_t *j, int64_t item) {
    int64_t i = item / j->chunks_per_row;
    int64_t a = (item % j->chunks_per_row) * (int64_t)CHUNK_TOKENS;
    int64_t b = a + CHUNK_TOKENS < j->width ? a + CHUNK_TOKENS : j->width;
    int64_t r = j->rows ? j->rows[i] : i;
    const uint32_t *mask = (const uint32_t *)(j->bitmask + 4 * i * j->mask_stride);
#ifdef HAVE_AVX512
    if (use_avx512()) {
        if (j->elem_size == 4)
            range_u32_avx512((uint32_t *)j->logits + r * j->row_stride, mask, a, b, j->limit, j->neg);
        else
            range_u16_avx512((uint16_t *)j->logits + r * j->row_stride, mask, a, b, j->limit, (uint16_t)j->neg);
        return;
    }
#endif
    if (j->elem_size == 4)
        range_u32((uint32_t *)j->logits + r * j->row_stride, mask, a, b, j->limit, j->neg);
    else
        range_u16((uint16_t *)j->logits + r * j->row_stride, mask, a, b, j->limit, (uint16_t)j->neg);
}

/* A persistent pool of helper threads that never makes the caller wait for a helper to start.

   The caller publishes a job (a new generation in the high half of g_state, the next free item in
   the low half), wakes the helpers, and takes items itself. A helper that wakes late finds every
   item taken and goes back to sleep. The caller waits only for items a helper has claimed and not
   finished. So on a machine whose other cores are busy, a call costs what the caller alone does,
   instead of stalling at a fork-join barrier until the scheduler runs a helper (milliseconds).
   A helper claims an item with a compare-and-swap on g_state that also checks the generation, so
   it can never take an item of a job other than the one whose parameters it copied. */
static job_t g_job;
static uint64_t g_state;                 /* (generation << 32) | next item; atomic */
static int64_t g_done;                   /* finished items of the current job; atomic */
static uint32_t g_gen;                   /* last generation published (helpers wait on it) */
static int g_helpers;                    /* helpers started in this process */
static int g_sleepers;                   /* helpers blocked on g_cv; atomic */
static pid_t g_pid;                      /* process that started them (a fork child has none) */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t g_call = PTHREAD_MUTEX_INITIALIZER;  /* one job in the pool at a time */

static void drain(uint32_t gen) {
    for (;;) {
        uint64_t s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
        if ((uint32_t)(s >> 32) != gen) return;
        job_t j;
        memcpy(&j, &g_job, sizeof j);     /* validated by the CAS below */
        int64_t item = (int64_t)(s & 0xFFFFFFFFu);
        if (item >= j.n_items) return;
        if (!__atomic_compare_exchange_n(&g_state, &s, s + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        run_item(&j, item);
        __atomic_fetch_add(&g_done, 1, __ATOMIC_RELEASE);
    }
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void *helper(void *arg) {
    (void)arg;
    uint32_t seen = 0;
    for (;;) {
        /* Watch for the next job for SPIN_NS (back-to-back calls find the helper awake), then sleep. */
        int64_t until = now_ns() + SPIN_NS;
        uint32_t gen = seen;
        while (gen == seen && now_ns() < until) {
            for (int k = 0; k < 64; k++) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            }
            gen = (uint32_t)(__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) >> 32);
        }
        if (gen == seen) {
            pthread_mutex_lock(&g_mu);
            __atomic_fetch_add(&g_sleepers, 1, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&g_gen, __ATOMIC_SEQ_CST) == seen) pthread_cond_wait(&g_cv, &g_mu);
            __atomic_fetch_sub(&g_sleepers, 1, __ATOMIC_SEQ_CST);
            gen = __atomic_load_n(&g_gen, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&g_mu);
        }
        seen = gen;
        drain(seen);
    }
    return 0;
}

static int ensure_helpers(int wanted) {
    pid_t pid = getpid();
    if (g_pid != pid) {  /* first use, or a fork child: threads are not inherited, locks may be */
        g_helpers = 0;
        g_sleepers = 0;
        g_pid = pid;
        pthread_mutex_init(&g_mu, 0);
        pthread_cond_init(&g_cv, 0);
    }
    while (g_helpers < wanted) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 1 << 16);
        int rc = pthread_create(&t, &attr, helper, 0);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        g_helpers++;
    }
    return g_helpers;
}

/* Does `rows` name a logits row twice? Two threads must never work on the same row and chunk: a word
   with many zero bits is blended, which rewrites the allowed logits with the values read before, so
   a -inf stored meanwhile by the other thread (the other mask of that row) could be undone. */
static int has_duplicate_rows(const int64_t *rows, int64_t n_rows) {
    if (!rows || n_rows < 2) return 0;
    int64_t hi = 0;
    for (int64_t i = 0; i < n_rows; i++) if (rows[i] > hi) hi = rows[i];
    uint64_t *seen = (uint64_t *)calloc((size_t)(hi / 64 + 1), sizeof(uint64_t));
    if (!seen) return 1;                  /* cannot tell: take the safe answer */
    int dup = 0;
    for (int64_t i = 0; i < n_rows && !dup; i++) {
        uint64_t bit = 1ull << (rows[i] & 63);
        dup = (seen[rows[i] >> 6] & bit) != 0;
        seen[rows[i] >> 6] |= bit;
    }
    free(seen);
    return dup;
}

/* Returns the number of threads that could take part (1 = the caller alone). */
int thinkgate_apply_bitmask(void *logits, int64_t row_stride, int64_t width,
                            const void *bitmask, int64_t mask_stride, const int64_t *rows,
                            int64_t n_rows, int64_t limit, int32_t elem_size, uint32_t neg,
                            int32_t n_threads) {
    if (n_rows <= 0 || width <= 0) return 0;
    job_t j;
    j.logits = (char *)logits; j.row_stride = row_stride; j.width = width;
    j.bitmask = (const char *)bitmask; j.mask_stride = mask_stride; j.rows = rows;
    j.limit = limit; j.elem_size = elem_size; j.neg = neg;
    j.chunks_per_row = (width + CHUNK_TOKENS - 1) / CHUNK_TOKENS;
    j.n_items = n_rows * j.chunks_per_row;
    if (n_threads > j.n_items) n_threads = (int32_t)j.n_items;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads > 1 && has_duplicate_rows(rows, n_rows)) n_threads = 1;  /* duplicates: in order, exact */
    /* One thread wanted, more items than a generation can count, or the pool busy with another
       caller's job: do it all here. */
    if (n_threads <= 1 || j.n_items >= 0xFFFFFFFFll || pthread_mutex_trylock(&g_call) != 0) {
        for (int64_t it = 0; it < j.n_items; it++) run_item(&j, it);
        return 1;
    }
    int helpers = ensure_helpers(n_threads - 1);
    uint32_t gen = (uint32_t)(__atomic_load_n(&g_state, __ATOMIC_RELAXED) >> 32) + 1u;
    if (gen == 0u) gen = 1u;              /* 0 is the helpers' initial "seen" */
    /* Close the state first (new generation, no claimable item), so a helper still looking at the
       previous job fails its CAS even if it copies the parameters being written now. */
    __atomic_store_n(&g_state, ((uint64_t)gen << 32) | 0xFFFFFFFFull, __ATOMIC_SEQ_CST);
    memcpy(&g_job, &j, sizeof j);
    __atomic_store_n(&g_done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_state, (uint64_t)gen << 32, __ATOMIC_RELEASE);
    /* Wake sleeping helpers (a futex call); spinning ones see g_state. A wake-up lost in a race
       costs only that helper's help with this job: the caller never waits for it. */
    __atomic_store_n(&g_gen, gen, __ATOMIC_SEQ_CST);
    if (helpers > 0 && __atomic_load_n(&g_sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&g_mu);
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
    drain(gen);
    /* Every item is claimed; wait for the ones helpers are still running. */
    for (unsigned spins = 0; __atomic_load_n(&g_done, __ATOMIC_ACQUIRE) < j.n_items; spins++) {
        if (spins > 64) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#endif
    }
    pthread_mutex_unlock(&g_call);
    return helpers + 1;
}
