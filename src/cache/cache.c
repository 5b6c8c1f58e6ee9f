/* cache/cache.c — see cache.h.
 *
 * A chained hash table of entries, each also on one least-recently-used
 * list (head: the newest). An entry is one allocation (the struct, its
 * tensors and their names, then the key's bytes) plus one buffer holding
 * every output's bytes, which the stored tensors and every view handed out
 * share by reference.
 */
#include "cache/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

struct entry {
  struct entry *hnext;       /* hash chain */
  struct entry *prev, *next; /* LRU list */
  uint64_t hash;
  size_t key_len;
  const unsigned char *key; /* inside this allocation */
  size_t n;
  struct pts_tensor *outs; /* n, inside this allocation; buf: `bytes` below */
  struct pts_buf *bytes;   /* one reference for the entry */
  size_t charge;           /* what it counts against the capacity */
};

struct pts_cache {
  pthread_mutex_t lock;
  struct entry **buckets; /* owned, n_buckets (a power of two) */
  size_t n_buckets;
  struct entry *head, *tail;
  struct pts_cache_stats st; /* capacity, bytes and entries kept current */
};

/* Room for the table's growth: it doubles when it holds more entries than
 * buckets, so chains stay short. */
#define FIRST_BUCKETS 256

struct pts_cache *pts_cache_new(size_t capacity) {
  if (capacity == 0) return NULL;
  struct pts_cache *c = pts_calloc(1, sizeof *c);
  if (!c) return NULL;
  c->buckets = pts_calloc(FIRST_BUCKETS, sizeof *c->buckets);
  if (!c->buckets) {
    pts_free(c);
    return NULL;
  }
  c->n_buckets = FIRST_BUCKETS;
  c->st.capacity = capacity;
  pthread_mutex_init(&c->lock, NULL);
  return c;
}

static void entry_free(struct entry *e) {
  for (size_t i = 0; i < e->n; i++) pts_buf_release(e->outs[i].buf);
  pts_buf_release(e->bytes);
  pts_free(e);
}

void pts_cache_free(struct pts_cache *c) {
  if (!c) return;
  for (struct entry *e = c->head, *next; e; e = next) {
    next = e->next;
    entry_free(e);
  }
  pthread_mutex_destroy(&c->lock);
  pts_free(c->buckets);
  pts_free(c);
}

/* ------------------------------------------------------------------ keys */

/* 64-bit multiply-rotate hash over 8-byte words (the tail zero-padded),
 * finished with splitmix64's mixer. Fast on large inputs; it needs to be
 * no defence, since lookups compare the whole key. */
static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v * 0x9E3779B97F4A7C15ull;
  h = (h << 31 | h >> 33) * 0xBF58476D1CE4E5B9ull;
  return h;
}

static uint64_t hash_bytes(const unsigned char *p, size_t n) {
  uint64_t h = 0x243F6A8885A308D3ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    h = mix(h, v);
  }
  if (i < n) {
    uint64_t v = 0;
    memcpy(&v, p + i, n - i);
    h = mix(h, v);
  }
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

/* The key's layout: generation, version, the model name and NUL, the
 * input count, then per input (by name) its name and NUL, datatype, rank,
 * dims, byte size and bytes. Fixed-width fields, so that no two different
 * requests write the same bytes. */
struct writer {
  unsigned char *p;
  size_t len;
};

static void put(struct writer *w, const void *src, size_t n) {
  if (w->p && n) memcpy(w->p + w->len, src, n);
  w->len += n;
}

static void put_u64(struct writer *w, uint64_t v) { put(w, &v, sizeof v); }

static int by_name(const void *a, const void *b) {
  const struct pts_tensor *x = *(const struct pts_tensor *const *)a;
  const struct pts_tensor *y = *(const struct pts_tensor *const *)b;
  return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static void write_key(struct writer *w, uint64_t generation, const char *model, int64_t version,
                      const struct pts_tensor *const *sorted, size_t n) {
  put_u64(w, generation);
  put_u64(w, (uint64_t)version);
  put(w, model, strlen(model) + 1);
  put_u64(w, n);
  for (size_t i = 0; i < n; i++) {
    const struct pts_tensor *t = sorted[i];
    const char *name = t->name ? t->name : "";
    put(w, name, strlen(name) + 1);
    put_u64(w, (uint64_t)t->dtype);
    put_u64(w, (uint64_t)t->shape.ndim);
    for (int d = 0; d < t->shape.ndim; d++) put_u64(w, (uint64_t)t->shape.dims[d]);
    put_u64(w, t->byte_size);
    put(w, t->data, t->byte_size);
  }
}

enum pts_status pts_cache_key_make(uint64_t generation, const char *model_name, int64_t version,
                                   const struct pts_tensor *inputs, size_t n,
                                   struct pts_cache_key *key, struct pts_error *err) {
  memset(key, 0, sizeof *key);
  for (size_t i = 0; i < n; i++)
    if (inputs[i].mem == PTS_MEM_DEVICE)
      return pts_error_set(err, PTS_UNSUPPORTED,
                           "input '%s' is in device memory, which the response cache does not read",
                           inputs[i].name);
  const struct pts_tensor **sorted = pts_malloc((n ? n : 1) * sizeof *sorted);
  if (!sorted) return pts_error_set(err, PTS_NOMEM, "out of memory making a response cache key");
  for (size_t i = 0; i < n; i++) sorted[i] = &inputs[i];
  qsort(sorted, n, sizeof *sorted, by_name);
  struct writer w = {0};
  write_key(&w, generation, model_name, version, sorted, n); /* measures */
  w.p = pts_malloc(w.len);
  if (!w.p) {
    pts_free(sorted);
    return pts_error_set(err, PTS_NOMEM, "out of memory making a response cache key");
  }
  size_t len = w.len;
  w.len = 0;
  write_key(&w, generation, model_name, version, sorted, n);
  pts_free(sorted);
  key->bytes = w.p;
  key->len = len;
  key->hash = hash_bytes(w.p, len);
  return PTS_OK;
}

void pts_cache_key_clear(struct pts_cache_key *key) {
  if (!key) return;
  pts_free(key->bytes);
  memset(key, 0, sizeof *key);
}

/* ----------------------------------------------------------------- table */

static struct entry **slot(struct pts_cache *c, uint64_t hash) {
  return &c->buckets[hash & (c->n_buckets - 1)];
}

static struct entry *find(struct pts_cache *c, uint64_t hash, const unsigned char *key,
                          size_t len) {
  for (struct entry *e = *slot(c, hash); e; e = e->hnext)
    if (e->hash == hash && e->key_len == len && memcmp(e->key, key, len) == 0) return e;
  return NULL;
}

static void lru_unlink(struct pts_cache *c, struct entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push(struct pts_cache *c, struct entry *e) {
  e->next = c->head;
  e->prev = NULL;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

/* Takes e out of the table and the list, and out of the counts. */
static void unlink_entry(struct pts_cache *c, struct entry *e) {
  struct entry **at = slot(c, e->hash);
  while (*at != e) at = &(*at)->hnext;
  *at = e->hnext;
  lru_unlink(c, e);
  c->st.bytes -= e->charge;
  c->st.entries--;
}

/* Doubles the table when it holds more entries than buckets; a failed
 * allocation leaves it as it is (longer chains, still correct). */
static void maybe_grow(struct pts_cache *c) {
  if (c->st.entries <= c->n_buckets) return;
  size_t n = c->n_buckets * 2;
  struct entry **b = pts_calloc(n, sizeof *b);
  if (!b) return;
  for (size_t i = 0; i < c->n_buckets; i++)
    for (struct entry *e = c->buckets[i], *next; e; e = next) {
      next = e->hnext;
      e->hnext = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
    }
  pts_free(c->buckets);
  c->buckets = b;
  c->n_buckets = n;
}

bool pts_cache_lookup(struct pts_cache *c, const struct pts_cache_key *key, struct pts_tensor *outs,
                      size_t n) {
  pthread_mutex_lock(&c->lock);
  struct entry *e = find(c, key->hash, key->bytes, key->len);
  bool hit = e && e->n == n;
  for (size_t i = 0; hit && i < n; i++) {
    if (pts_tensor_copy_view(&outs[i], &e->outs[i], NULL) != PTS_OK) {
      for (size_t j = 0; j < i; j++) pts_tensor_clear(&outs[j]);
      hit = false; /* out of memory: the model runs instead */
    }
  }
  if (hit) {
    c->st.hits++;
    lru_unlink(c, e);
    lru_push(c, e);
  } else {
    c->st.misses++;
  }
  pthread_mutex_unlock(&c->lock);
  return hit;
}

/* One allocation for the entry, its tensors, their names and the key's
 * bytes; one buffer for the outputs' bytes (copied outside the lock). */
static struct entry *entry_new(struct pts_cache_key *key, const struct pts_tensor *outs, size_t n) {
  size_t names = 0, data = 0;
  for (size_t i = 0; i < n; i++) {
    if (outs[i].mem == PTS_MEM_DEVICE) return NULL;
    names += strlen(outs[i].name ? outs[i].name : "") + 1;
    data += outs[i].byte_size;
  }
  size_t head = sizeof(struct entry) + n * sizeof(struct pts_tensor);
  struct entry *e = pts_calloc(1, head + names + key->len);
  if (!e) return NULL;
  e->bytes = pts_buf_new(data ? data : 1);
  if (!e->bytes) {
    pts_free(e);
    return NULL;
  }
  e->outs = (struct pts_tensor *)(e + 1);
  char *name_at = (char *)e + head;
  unsigned char *key_at = (unsigned char *)name_at + names;
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    struct pts_tensor *t = &e->outs[i];
    const char *name = outs[i].name ? outs[i].name : "";
    size_t nl = strlen(name) + 1;
    memcpy(name_at, name, nl);
    /* The name lives in the entry's allocation: pts_tensor_clear is never
     * called on these tensors (entry_free releases their buffers). */
    t->name = name_at;
    name_at += nl;
    t->dtype = outs[i].dtype;
    t->shape = outs[i].shape;
    t->byte_size = outs[i].byte_size;
    t->mem = PTS_MEM_HOST;
    if (outs[i].byte_size) memcpy((char *)e->bytes->data + off, outs[i].data, outs[i].byte_size);
    t->data = (char *)e->bytes->data + off;
    t->buf = pts_buf_retain(e->bytes);
    off += outs[i].byte_size;
  }
  if (key->len) memcpy(key_at, key->bytes, key->len);
  e->key = key_at;
  e->key_len = key->len;
  e->hash = key->hash;
  e->n = n;
  e->charge = head + names + key->len + data;
  return e;
}

bool pts_cache_insert(struct pts_cache *c, struct pts_cache_key *key, const struct pts_tensor *outs,
                      size_t n) {
  struct entry *e = entry_new(key, outs, n);
  pts_cache_key_clear(key);
  if (!e) return false;
  pthread_mutex_lock(&c->lock);
  bool stored = false;
  if (e->charge <= c->st.capacity && !find(c, e->hash, e->key, e->key_len)) {
    while (c->st.bytes + e->charge > c->st.capacity && c->tail) {
      struct entry *old = c->tail;
      unlink_entry(c, old);
      c->st.evictions++;
      entry_free(old); /* views handed out keep their bytes */
    }
    struct entry **at = slot(c, e->hash);
    e->hnext = *at;
    *at = e;
    lru_push(c, e);
    c->st.bytes += e->charge;
    c->st.entries++;
    maybe_grow(c);
    stored = true;
  }
  pthread_mutex_unlock(&c->lock);
  if (!stored) entry_free(e);
  return stored;
}

void pts_cache_get_stats(struct pts_cache *c, struct pts_cache_stats *out) {
  pthread_mutex_lock(&c->lock);
  *out = c->st;
  pthread_mutex_unlock(&c->lock);
}

/* ---------------------------------------------------------------- config */

enum pts_status pts_cache_parse_config(const char *const *values, size_t n, size_t *capacity,
                                       struct pts_error *err) {
  *capacity = 0;
  for (size_t i = 0; i < n; i++) {
    const char *v = values[i];
    const char *comma = strchr(v, ',');
    if (!comma)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--cache-config '%s': expected <cache>,<key>=<value>, e.g. "
                           "local,size=1048576",
                           v);
    size_t cl = (size_t)(comma - v);
    if (cl != 5 || strncmp(v, "local", 5) != 0)
      return pts_error_set(err, PTS_UNSUPPORTED,
                           "--cache-config '%s': cache '%.*s' is not supported by ptserve (it has "
                           "the 'local' cache)",
                           v, (int)cl, v);
    const char *kv = comma + 1, *eq = strchr(kv, '=');
    if (!eq || eq == kv)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--cache-config '%s': expected <cache>,<key>=<value>", v);
    if ((size_t)(eq - kv) != 4 || strncmp(kv, "size", 4) != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--cache-config '%s': the local cache has no key '%.*s' (it takes "
                           "size=<bytes>)",
                           v, (int)(eq - kv), kv);
    const char *num = eq + 1;
    char *end = NULL;
    unsigned long long bytes = num[0] >= '0' && num[0] <= '9' ? strtoull(num, &end, 10) : 0;
    if (!end || *end || end == num)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--cache-config '%s': size must be a number of bytes, not '%s'", v,
                           num);
    *capacity = (size_t)bytes;
  }
  return PTS_OK;
}

static struct pts_cache *process_cache;

enum pts_status pts_cache_start(size_t capacity, struct pts_error *err) {
  if (capacity == 0) return PTS_OK;
  process_cache = pts_cache_new(capacity);
  if (!process_cache)
    return pts_error_set(err, PTS_NOMEM, "out of memory creating the response cache (%zu bytes)",
                         capacity);
  return PTS_OK;
}

void pts_cache_stop(void) {
  pts_cache_free(process_cache);
  process_cache = NULL;
}

struct pts_cache *pts_cache_process(void) { return process_cache; }
