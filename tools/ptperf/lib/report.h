/* ptperf/lib/report.h — one result per concurrency, as a table and as CSV.
 *
 * Times are microseconds. "Infer/s" counts batch elements, as
 * perf_analyzer's "Inferences/Second" does (a batch-4 request is 4). The
 * server columns are empty when the server has no statistics; "overhead"
 * is the client's average latency minus the server's own request time:
 * HTTP parsing and writing, the network stack, and the client. "cpu"
 * columns are CPU time per request, a number the load of other processes
 * on a shared machine disturbs less than latency.
 *
 * Threading: the caller serialises writes to one FILE.
 */
#ifndef PTPERF_REPORT_H
#define PTPERF_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ptperf/lib/stats.h"
#include "ptperf/lib/window.h"

struct ptperf_result {
  const char *model;    /* borrowed */
  const char *protocol; /* "http", "grpc", "grpc_stream"; static */
  int batch_size, concurrency;
  double seconds;       /* measured time, all windows reported together */
  double infer_per_sec; /* batch elements per second */
  struct ptperf_latency lat;
  uint64_t errors;
  int windows; /* windows measured before the result was stable (or max) */
  bool stable;
  struct ptperf_breakdown server; /* server.valid false: no statistics */
  /* CPU time per successful request (µs) of the client and, when its pid
   * was given, the server; < 0: unknown. On a machine they share, the sum
   * bounds throughput: cores / (client + server) requests per second. */
  double client_cpu_us, server_cpu_us;
  /* With the server's pid: the share of all cores' time (%) that other
   * processes used during the windows, i.e. how disturbed the numbers are;
   * < 0: unknown. */
  double other_cpu_pct;
  /* With the server's pid: its minor page faults per successful request
   * (CSV only); < 0: unknown. Near 0 once its pools have grown to the load. */
  double server_faults;
};

void ptperf_report_table_header(FILE *f);
void ptperf_report_table_row(FILE *f, const struct ptperf_result *r);
void ptperf_report_csv_header(FILE *f);
void ptperf_report_csv_row(FILE *f, const struct ptperf_result *r);

#endif
