/* ptperf/lib/report.c — the table and the CSV. */
#include "ptperf/lib/report.h"

#include <string.h>

void ptperf_report_table_header(FILE *f) {
  fprintf(f,
          "%11s %10s %8s %8s %8s %8s %8s %7s %7s %6s | %8s %8s %8s %8s %8s %8s %6s | %7s %7s %6s\n",
          "Concurrency", "Infer/s", "p50 us", "p90 us", "p95 us", "p99 us", "avg us", "Errors",
          "Windows", "Stable", "queue", "c.input", "c.infer", "c.output", "server", "overhead",
          "batch", "cli cpu", "srv cpu", "other%");
}

void ptperf_report_table_row(FILE *f, const struct ptperf_result *r) {
  fprintf(f, "%11d %10.1f %8.0f %8.0f %8.0f %8.0f %8.1f %7llu %7d %6s |", r->concurrency,
          r->infer_per_sec, r->lat.p50_us, r->lat.p90_us, r->lat.p95_us, r->lat.p99_us,
          r->lat.avg_us, (unsigned long long)r->errors, r->windows, r->stable ? "yes" : "no");
  const struct ptperf_breakdown *s = &r->server;
  if (s->valid)
    fprintf(f, " %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6.2f |", s->queue_us, s->compute_input_us,
            s->compute_infer_us, s->compute_output_us, s->request_us, r->lat.avg_us - s->request_us,
            s->avg_batch);
  else
    fprintf(f, " %8s %8s %8s %8s %8s %8s %6s |", "-", "-", "-", "-", "-", "-", "-");
  const double cpu[2] = {r->client_cpu_us, r->server_cpu_us};
  for (int i = 0; i < 2; i++) {
    if (cpu[i] >= 0)
      fprintf(f, " %7.1f", cpu[i]);
    else
      fprintf(f, " %7s", "-");
  }
  if (r->other_cpu_pct >= 0)
    fprintf(f, " %6.1f\n", r->other_cpu_pct);
  else
    fprintf(f, " %6s\n", "-");
}

void ptperf_report_csv_header(FILE *f) {
  fputs(
      "model,protocol,batch_size,concurrency,infer_per_sec,p50_us,p90_us,p95_us,p99_us,avg_us,"
      "requests,errors,seconds,windows,stable,server_queue_us,server_compute_input_us,"
      "server_compute_infer_us,server_compute_output_us,server_request_us,"
      "client_overhead_us,server_avg_batch,client_cpu_us,server_cpu_us,other_cpu_pct,"
      "server_faults_per_req\n",
      f);
}

/* RFC 4180: quote a field holding a comma, quote or line break. */
static void csv_text(FILE *f, const char *s) {
  if (strpbrk(s, ",\"\r\n") == NULL) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void ptperf_report_csv_row(FILE *f, const struct ptperf_result *r) {
  csv_text(f, r->model);
  fputc(',', f);
  csv_text(f, r->protocol ? r->protocol : "http");
  fprintf(f, ",%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%zu,%llu,%.3f,%d,%d", r->batch_size,
          r->concurrency, r->infer_per_sec, r->lat.p50_us, r->lat.p90_us, r->lat.p95_us,
          r->lat.p99_us, r->lat.avg_us, r->lat.count, (unsigned long long)r->errors, r->seconds,
          r->windows, r->stable ? 1 : 0);
  const struct ptperf_breakdown *s = &r->server;
  if (s->valid)
    fprintf(f, ",%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f", s->queue_us, s->compute_input_us,
            s->compute_infer_us, s->compute_output_us, s->request_us, r->lat.avg_us - s->request_us,
            s->avg_batch);
  else
    fputs(",,,,,,,", f);
  const double cpu[2] = {r->client_cpu_us, r->server_cpu_us};
  for (int i = 0; i < 2; i++) {
    if (cpu[i] >= 0)
      fprintf(f, ",%.2f", cpu[i]);
    else
      fputc(',', f);
  }
  if (r->other_cpu_pct >= 0)
    fprintf(f, ",%.1f", r->other_cpu_pct);
  else
    fputc(',', f);
  if (r->server_faults >= 0)
    fprintf(f, ",%.2f\n", r->server_faults);
  else
    fputs(",\n", f);
}
