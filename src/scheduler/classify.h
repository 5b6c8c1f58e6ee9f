/* scheduler/classify.h — the classification extension (protocol-facts §1.9).
 *
 * A requested output with the `classification` parameter k > 0 is replaced
 * by a BYTES tensor: for each batch item (or for the whole output when the
 * model does not batch), the k largest elements, highest first, each as
 * "<value>:<index>" or "<value>:<index>:<label>". Triton is the reference:
 *   - values are compared in the output's own type and printed as C++'s
 *     std::to_string prints that type: integers in decimal, FP32/FP64 as
 *     "%f" (six decimals: "0.297628", not Triton's doc example "0.3");
 *   - the label of class i is line i of the output's label_filename (a file
 *     in the model directory); classes beyond the file have no label;
 *   - the shape is [batch, min(k, count)] for a batching model (count =
 *     elements per batch item), else [min(k, count)];
 *   - BOOL, FP16, BF16 and BYTES outputs can not be classified
 *     (pts_classify_supported).
 * Ties keep the lower index first (Triton's std::sort leaves their order
 * unspecified); NaN sorts below every number.
 *
 * Ownership: pts_labels owns its strings; pts_classify's result tensor owns
 * its name and a new buffer.
 *
 * Threading: pts_labels_load runs at model load; a loaded pts_labels is
 * read-only and may be shared by every instance thread. pts_classify is a
 * pure function.
 */
#ifndef PTS_SCHEDULER_CLASSIFY_H
#define PTS_SCHEDULER_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/tensor.h"

struct pts_labels {
  size_t n;
  char **names; /* owned, n entries (each pts_malloc'd, without its newline) */
};

/* Reads `path`, one label per line ("\n" or "\r\n" endings; a last line
 * without a newline counts). On error (NOT_FOUND when the file can not be
 * read) *out is left empty and err names the file. Clear with
 * pts_labels_clear. */
enum pts_status pts_labels_load(const char *path, struct pts_labels *out, struct pts_error *err);
void pts_labels_clear(struct pts_labels *l); /* NULL-safe; leaves *l empty */

/* Whether outputs of this type can be classified. */
bool pts_classify_supported(enum pts_dtype t);

/* The top-k classification of `out` (a fixed-size numeric tensor of a
 * supported type; `batched`: its first dimension is the batch) into
 * `*result`, named like `out`. `labels` may be NULL. INVALID_ARG for an
 * unsupported type, NOMEM on allocation failure. Caller clears *result with
 * pts_tensor_clear. */
enum pts_status pts_classify(const struct pts_tensor *out, bool batched, uint32_t k,
                             const struct pts_labels *labels, struct pts_tensor *result,
                             struct pts_error *err);

#endif
