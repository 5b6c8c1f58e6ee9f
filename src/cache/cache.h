/* cache/cache.h — the response cache: answers kept by what was asked.
 *
 * Triton's response cache (`--cache-config local,size=<bytes>` on the
 * server, `response_cache { enable: true }` in a model's config): an
 * inference request whose model name, version and input tensors (name,
 * datatype, shape and bytes) equal those of an earlier successful one gets
 * that one's outputs without the model running. One cache serves every
 * model of the process; it holds at most `size` bytes and drops the least
 * recently used answers to make room.
 *
 * Unlike Triton's, which keeps a 64-bit hash of the request and trusts it,
 * an entry keeps the request's whole key (its input bytes included) and a
 * lookup compares it byte for byte: two requests whose hashes collide, by
 * chance or by a client's design, never get each other's answer. The key's
 * bytes count towards `size` with the outputs'.
 *
 * Ownership: the cache owns its entries; an answer taken from it is a set
 * of tensor views (each holding a reference to the entry's bytes), so an
 * entry evicted while a response still uses it frees its bytes only when
 * that response lets go of them. A key is owned by whoever made it until
 * pts_cache_insert takes it.
 *
 * Threading: every function on a `struct pts_cache` is thread-safe (one
 * mutex; lookups and inserts hold it only while they walk the table and
 * make views, never while copying a request's bytes or an answer's).
 * The process-wide cache is set up and taken down on the main thread, with
 * no model loaded (pts_cache_start / pts_cache_stop).
 */
#ifndef PTS_CACHE_CACHE_H
#define PTS_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/tensor.h"

struct pts_cache;

/* What a request is looked up by: its hash and the bytes it was made from. */
struct pts_cache_key {
  uint64_t hash;
  size_t len;
  unsigned char *bytes; /* owned (pts_free); NULL for an empty key */
};

/* Counters since the cache was made (nv_cache_* metrics, docs/metrics.md). */
struct pts_cache_stats {
  uint64_t capacity;  /* bytes it may hold */
  uint64_t bytes;     /* bytes held now: keys, answers and bookkeeping */
  uint64_t entries;   /* answers held now; entries + evictions were stored */
  uint64_t hits, misses; /* lookups, the two together */
  uint64_t evictions; /* answers dropped to make room */
};

/* A cache of `capacity` bytes (> 0). NULL when out of memory. */
struct pts_cache *pts_cache_new(size_t capacity);
/* NULL-safe. Answers already handed out stay valid: their views hold the
 * bytes they show. */
void pts_cache_free(struct pts_cache *c);

/* The key of a request to the model run that `generation` names (a number
 * unique to one load of one model version, so a reloaded model never gets
 * the answers of the one before) for `n` input tensors, in any order (the
 * key sorts them by name). UNSUPPORTED, and no key, when an input's bytes
 * are not in host memory (a CUDA shared-memory region): such a request is
 * not cached, as in Triton. NOMEM when out of memory. */
enum pts_status pts_cache_key_make(uint64_t generation, const char *model_name, int64_t version,
                                   const struct pts_tensor *inputs, size_t n,
                                   struct pts_cache_key *key, struct pts_error *err);
void pts_cache_key_clear(struct pts_cache_key *key); /* NULL-safe; leaves it empty */

/* On a hit, fills outs[0..n) with views of the stored answer's `n` tensors
 * (the caller clears them) and returns true; a stored answer of another
 * size, or no answer, is a miss. Counts the lookup either way. */
bool pts_cache_lookup(struct pts_cache *c, const struct pts_cache_key *key, struct pts_tensor *outs,
                      size_t n);

/* Stores a copy of the `n` tensors as the answer to `key`, which it takes
 * (the key is left empty, whatever the outcome). Nothing is stored when an
 * answer to the key is already there, when a tensor is not in host memory,
 * when the entry alone is larger than the cache, or when out of memory;
 * older answers are evicted until it fits. True when it was stored. */
bool pts_cache_insert(struct pts_cache *c, struct pts_cache_key *key, const struct pts_tensor *outs,
                      size_t n);

void pts_cache_get_stats(struct pts_cache *c, struct pts_cache_stats *out);

/* --cache-config: each value is "<cache>,<key>=<value>" (tritonserver's
 * syntax). ptserve has the `local` cache with its `size` in bytes; any
 * other cache or key is refused by name. *capacity is the size given (0
 * when no value names one). */
enum pts_status pts_cache_parse_config(const char *const *values, size_t n, size_t *capacity,
                                       struct pts_error *err);

/* The process-wide cache that models with response_cache enabled use:
 * started by the server when --cache-config gives it a size, stopped when
 * the server is destroyed. pts_cache_process() is NULL when there is none. */
enum pts_status pts_cache_start(size_t capacity, struct pts_error *err);
void pts_cache_stop(void);
struct pts_cache *pts_cache_process(void);

#endif
