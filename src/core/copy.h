/* core/copy.h — large host memory copies on several threads.
 *
 * One core copies host memory at roughly 10 GB/s; gathering a batch of
 * images (hundreds of MB a second at GPU throughput) on one thread is a
 * visible share of a batch's time. pts_copy_parts splits a large copy into
 * 1 MiB chunks that a small process-wide pool of threads and the caller
 * take turns on. Small copies (under 4 MiB in all) are plain memcpy on
 * the calling thread, and so is everything while the pool is busy with
 * another caller's copy: the pool never makes a caller wait for a stranger.
 *
 * Pool size: the environment variable PTSERVE_COPY_THREADS (0 = no pool),
 * read once; by default a quarter of the CPUs, at most 4 (none on a host
 * with fewer than 4 CPUs). The threads start on the first large copy and
 * live as long as the process.
 *
 * The copy counter: every byte of tensor data the server copies with the
 * CPU is counted once (pts_copy_parts counts its own; the other copy sites
 * of the data path — shared-memory writes and device-to-host input copies —
 * call pts_copy_count), so a request's host copies can be checked from
 * outside (the metric ptserve_host_copy_bytes_total): a request whose
 * tensors stay in CUDA shared memory adds nothing.
 *
 * Threading: thread-safe; any thread may call.
 */
#ifndef PTS_CORE_COPY_H
#define PTS_CORE_COPY_H

#include <stddef.h>
#include <stdint.h>

/* Totals below this are copied by the caller alone. */
#define PTS_COPY_PARALLEL_MIN (4u << 20)

struct pts_copy_part {
  void *dst;
  const void *src;
  size_t n;
};

/* Copies every part (memcpy semantics: parts must not overlap). */
void pts_copy_parts(const struct pts_copy_part *parts, size_t n_parts);

/* Adds n to the host copy counter (a copy made other than by
 * pts_copy_parts). */
void pts_copy_count(size_t n);
/* Bytes counted since the process started. */
uint64_t pts_copy_bytes_total(void);

/* The number of pool threads (0 when copies stay on the caller's thread). */
int pts_copy_threads(void);

#endif
