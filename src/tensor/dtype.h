/* tensor/dtype.h — the one data-type table.
 *
 * Values equal the ModelConfig `DataType` enum numbers (TYPE_BOOL = 1 ...
 * TYPE_BF16 = 14), so a config's data_type converts by cast. Each row gives
 * the config name, the KServe protocol name and the element size (0 for
 * BYTES, whose elements are 4-byte-length-prefixed strings).
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_TENSOR_DTYPE_H
#define PTS_TENSOR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

/* XX(enum suffix, config name, protocol name, element size) */
#define PTS_DTYPE_MAP(XX)                      \
  XX(INVALID, "TYPE_INVALID", "INVALID", 0)    \
  XX(BOOL, "TYPE_BOOL", "BOOL", 1)             \
  XX(UINT8, "TYPE_UINT8", "UINT8", 1)          \
  XX(UINT16, "TYPE_UINT16", "UINT16", 2)       \
  XX(UINT32, "TYPE_UINT32", "UINT32", 4)       \
  XX(UINT64, "TYPE_UINT64", "UINT64", 8)       \
  XX(INT8, "TYPE_INT8", "INT8", 1)             \
  XX(INT16, "TYPE_INT16", "INT16", 2)          \
  XX(INT32, "TYPE_INT32", "INT32", 4)          \
  XX(INT64, "TYPE_INT64", "INT64", 8)          \
  XX(FP16, "TYPE_FP16", "FP16", 2)             \
  XX(FP32, "TYPE_FP32", "FP32", 4)             \
  XX(FP64, "TYPE_FP64", "FP64", 8)             \
  XX(BYTES, "TYPE_STRING", "BYTES", 0)         \
  XX(BF16, "TYPE_BF16", "BF16", 2)

enum pts_dtype {
#define XX(e, cfg, proto, size) PTS_DTYPE_##e,
  PTS_DTYPE_MAP(XX)
#undef XX
      PTS_DTYPE_COUNT
};

/* "FP32"; "INVALID" for out-of-range values. */
const char *pts_dtype_name(enum pts_dtype t);
/* "TYPE_FP32". */
const char *pts_dtype_config_name(enum pts_dtype t);
/* Bytes per element; 0 for BYTES and INVALID. */
size_t pts_dtype_size(enum pts_dtype t);
/* Protocol name → type (case-sensitive, as the protocol says); INVALID if unknown. */
enum pts_dtype pts_dtype_from_name(const char *name);
/* Config name ("TYPE_FP32") → type; INVALID if unknown. */
enum pts_dtype pts_dtype_from_config_name(const char *name);

#endif
