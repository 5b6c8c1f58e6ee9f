/* core/overload.c — see overload.h. Lock-free: the budget is one atomic
 * counter compared with one atomic limit. */
#include "core/overload.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/alloc.h"
#include "core/log.h"

static atomic_size_t budget_bytes;  /* 0 until configured: then the default */
static atomic_size_t held_bytes;
static atomic_size_t peak_bytes;    /* the highest `held` since the last trim */
static atomic_bool trim_again;      /* one more trim at the next tick */
static _Atomic int64_t counters[PTS_OVERLOAD_COUNTER_COUNT];
static _Atomic uint64_t queue_cap = PTS_OVERLOAD_DEFAULT_QUEUE_CAP;

void pts_overload_set_queue_cap(uint64_t cap) { atomic_store(&queue_cap, cap); }

uint64_t pts_overload_queue_cap(void) { return atomic_load(&queue_cap); }

size_t pts_overload_configure(size_t budget) {
  if (budget == 0) budget = pts_overload_default_budget(pts_overload_system_memory());
  atomic_store(&budget_bytes, budget);
  return budget;
}

size_t pts_overload_budget(void) {
  size_t b = atomic_load(&budget_bytes);
  return b ? b : pts_overload_configure(0);
}

static void note_peak(size_t now) {
  size_t peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
  }
}

bool pts_overload_try_charge(size_t n) {
  size_t limit = pts_overload_budget();
  size_t cur = atomic_load(&held_bytes);
  do {
    if (n > limit || cur > limit - n) return false;
  } while (!atomic_compare_exchange_weak(&held_bytes, &cur, cur + n));
  note_peak(cur + n);
  return true;
}

void pts_overload_charge(size_t n) {
  if (n == 0) return;
  note_peak(atomic_fetch_add(&held_bytes, n) + n);
}

size_t pts_overload_recharge(size_t from, size_t to) {
  if (to > from)
    pts_overload_charge(to - from);
  else
    pts_overload_release(from - to);
  return to;
}

void pts_overload_release(size_t n) {
  if (n == 0) return;
  size_t before = atomic_fetch_sub(&held_bytes, n);
  if (before < n) {
    /* A release without its charge is a bug; keep the counter sane. */
    atomic_fetch_add(&held_bytes, n - before);
    PTS_LOG_ERROR("memory budget: released %zu bytes with only %zu held", n, before);
  }
}

size_t pts_overload_held(void) { return atomic_load(&held_bytes); }

void pts_overload_count(enum pts_overload_counter c, int64_t delta) {
  if ((unsigned)c < PTS_OVERLOAD_COUNTER_COUNT)
    atomic_fetch_add_explicit(&counters[c], delta, memory_order_relaxed);
}

void pts_overload_snapshot(struct pts_overload_stats *out) {
  memset(out, 0, sizeof *out);
  out->budget = pts_overload_budget();
  out->held = pts_overload_held();
  for (int i = 0; i < PTS_OVERLOAD_COUNTER_COUNT; i++) {
    int64_t v = atomic_load_explicit(&counters[i], memory_order_relaxed);
    out->counters[i] = v > 0 ? (uint64_t)v : 0;
  }
}

/* PTSERVE_MALLOC_TRIM=0 turns the trim off: the A/B switch with which
 * docs/experiments/allocators measured the alternatives (capped arenas,
 * jemalloc, mimalloc) against it. Read once; the tick has one caller. */
static bool trim_wanted(void) {
  static int wanted = -1;
  if (wanted < 0) {
    const char *v = getenv("PTSERVE_MALLOC_TRIM");
    wanted = !(v && strcmp(v, "0") == 0);
  }
  return wanted;
}

/* The bytes of a burst (request bodies read in small evbuffer chains,
 * decoded tensors) were freed into malloc's arenas, where they stay
 * resident. jemalloc (the build links it; it may also be preloaded) gives
 * free pages back on its own clock, driven by later allocations, so an idle
 * server would keep them: "arena.<all>.purge" returns every arena's now
 * (4096 is MALLCTL_ARENAS_ALL, jemalloc 5). glibc: malloc_trim. */
static bool return_free_memory(void) {
  pts_mallctl_fn mallctl_fn = pts_jemalloc_mallctl();
  if (mallctl_fn) return mallctl_fn("arena.4096.purge", NULL, NULL, NULL, 0) == 0;
#if defined(__GLIBC__)
  malloc_trim(0);
  return true;
#else
  return false;
#endif
}

/* jemalloc's free pages not yet returned to the system, in bytes, from
 * its statistics ("epoch" refreshes them); -1 where the allocator does not
 * say (the C library's malloc, a jemalloc built without statistics). */
static int64_t allocator_dirty_bytes(void) {
  pts_mallctl_fn mallctl_fn = pts_jemalloc_mallctl();
  if (!mallctl_fn) return -1;
  uint64_t epoch = 1;
  size_t pdirty = 0, page = 0, len = sizeof epoch, plen = sizeof pdirty, glen = sizeof page;
  if (mallctl_fn("epoch", &epoch, &len, &epoch, sizeof epoch) != 0 ||
      mallctl_fn("stats.arenas.4096.pdirty", &pdirty, &plen, NULL, 0) != 0 ||
      mallctl_fn("arenas.page", &page, &glen, NULL, 0) != 0)
    return -1;
  return (int64_t)(pdirty * page);
}

bool pts_overload_burst_ended(size_t held, size_t peak, int64_t dirty) {
  if (held > peak / 4) return false;
  return dirty >= 0 ? (uint64_t)dirty >= PTS_OVERLOAD_TRIM_MIN : peak >= PTS_OVERLOAD_TRIM_MIN;
}

bool pts_overload_tick(void) {
  if (!trim_wanted()) return false;
  size_t held = pts_overload_held();
  size_t peak = atomic_load(&peak_bytes);
  /* The budget is released a moment before libevent frees the buffers it
   * counted (their bufferevents are finalized later in the loop), so the
   * trim after a burst is done again one tick later. */
  bool again = atomic_exchange(&trim_again, false);
  /* The first test is burst_ended's own, asked first so that a server
   * under load does not refresh jemalloc's statistics every second. */
  if (!again && (held > peak / 4 || !pts_overload_burst_ended(held, peak, allocator_dirty_bytes())))
    return false;
  if (!again) atomic_store(&trim_again, true);
  atomic_store(&peak_bytes, held);
  if (!return_free_memory()) return false;
  PTS_LOG_VERBOSE(1, "memory budget: returned free memory to the system after a burst of %zu "
                  "bytes (%zu held now)", peak, held);
  return true;
}

size_t pts_overload_default_budget(uint64_t total_memory) {
  const uint64_t floor = (uint64_t)64 << 20;
  uint64_t b = total_memory ? total_memory / 4 : (uint64_t)1 << 30;
  if (b < floor) b = floor;
  if (b > SIZE_MAX) b = SIZE_MAX;
  return (size_t)b;
}

/* A decimal byte count from a one-line file ("max" and junk: 0). */
static uint64_t read_limit_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[64] = {0};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *end;
  unsigned long long v = strtoull(buf, &end, 10);
  if (end == buf || (*end != '\n' && *end != '\0')) return 0;
  return (uint64_t)v;
}

uint64_t pts_overload_system_memory(void) {
  uint64_t total = 0;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) total = (uint64_t)pages * (uint64_t)page;
#if defined(__linux__)
  /* cgroup v2, then v1: a container's limit is what the OOM killer uses. */
  uint64_t cg = read_limit_file("/sys/fs/cgroup/memory.max");
  if (!cg) cg = read_limit_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (cg && (!total || cg < total)) total = cg;
#endif
  return total;
}

unsigned long pts_overload_default_connections(uint64_t nofile, unsigned percent) {
  const uint64_t cap = (uint64_t)1 << 20;
  if (nofile > cap) nofile = cap;
  if (percent > 100) percent = 100;
  uint64_t avail = nofile > 2u * PTS_OVERLOAD_FD_RESERVE ? nofile - PTS_OVERLOAD_FD_RESERVE
                                                         : nofile / 2;
  avail = avail * percent / 100;
  return avail ? (unsigned long)avail : 1;
}
