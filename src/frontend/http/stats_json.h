/* frontend/http/stats_json.h — the statistics extension's JSON
 * (protocol-facts §1.11): `{"model_stats":[...]}` with Triton's field names,
 * every inference_stats member (cache_hit/cache_miss included: perf_analyzer
 * requires them), `batch_stats` per executed batch size, an empty
 * `response_stats` object and `memory_usage` array.
 *
 * Threading: pure function; thread-safe.
 */
#ifndef PTS_FRONTEND_HTTP_STATS_JSON_H
#define PTS_FRONTEND_HTTP_STATS_JSON_H

#include <stddef.h>

#include "scheduler/stats.h"

/* A new NUL-terminated string (pts_free), length in *len; NULL on OOM.
 * `stats` is borrowed. */
char *pts_v2_stats_json(const struct pts_model_stats *stats, size_t n, size_t *len);

#endif
