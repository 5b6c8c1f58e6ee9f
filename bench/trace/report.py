"""bench/trace/report.py RAW OUT — the tracing-cost table from ptperf's CSVs.

RAW holds <mode>.<round>.csv (ptperf -f) and meta.txt (bench/trace/run.sh).
Writes OUT/results.md and OUT/results.csv: per mode and concurrency the
median over rounds of throughput, p50, p99 and server CPU per request, and
the ratio of each to tracing off in the same run.
"""
import csv
import glob
import os
import statistics
import sys

MODES = [("off", "off"), ("rate1000", "rate 1000"), ("rate1", "rate 1")]


def main(raw, out):
    meta = {}
    with open(os.path.join(raw, "meta.txt")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            meta[k] = v
    rows = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.csv"))):
        mode = os.path.basename(path).split(".")[0]
        with open(path) as f:
            for r in csv.DictReader(f):
                key = (mode, int(r["concurrency"]))
                rows.setdefault(key, []).append(r)

    def med(mode, conc, field):
        vals = [float(r[field]) for r in rows.get((mode, conc), [])]
        return statistics.median(vals) if vals else float("nan")

    concs = sorted({c for (_, c) in rows})
    table = []
    for conc in concs:
        base_tput, base_p50, base_cpu = (med("off", conc, f)
                                         for f in ("infer_per_sec", "p50_us", "server_cpu_us"))
        for mode, label in MODES:
            tput, p50, p99, cpu, other = (med(mode, conc, f) for f in
                                          ("infer_per_sec", "p50_us", "p99_us", "server_cpu_us",
                                           "other_cpu_pct"))
            errors = sum(int(r["errors"]) for r in rows.get((mode, conc), []))
            traces = sum(int(v) for k, v in meta.items() if k.startswith("traces_%s_" % mode))
            table.append({"tracing": label, "concurrency": conc, "infer_per_sec": tput,
                          "p50_us": p50, "p99_us": p99, "server_cpu_us_per_req": cpu,
                          "throughput_vs_off": tput / base_tput, "p50_vs_off": p50 / base_p50,
                          "server_cpu_vs_off": cpu / base_cpu, "rounds": len(rows.get((mode, conc), [])),
                          "others_cpu_pct": other, "errors": errors,
                          "traces_written_all_rounds": traces})

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        for r in table:
            w.writerow(r)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("# Tracing cost: off, rate 1000, rate 1 (tiny model, HTTP)\n\n")
        f.write("Produced by `bench/trace/run.sh` on %s, ptserve `%s`; %s rounds, "
                "%s ms windows; machine: %s CPUs (%s), load average before %s, after %s.\n\n"
                % (meta.get("date"), meta.get("commit"), meta.get("rounds"),
                   meta.get("interval_ms"), meta.get("cpus"), meta.get("cpu_model"),
                   meta.get("load_before"), meta.get("load_after")))
        f.write("Model: `tiny` (TorchScript, OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 "
                "on 16 floats, one CPU instance). Client: ptperf, HTTP keep-alive, binary "
                "tensors. Tracing on means `--trace-config level=TIMESTAMPS rate=N "
                "log-frequency=1000`: every traced request is stamped and, 1000 at a time, "
                "written as Triton JSON and a Chrome trace by the writer thread.\n\n")
        f.write("Each value is the median over the rounds (modes interleaved within each "
                "round); ratios are to tracing off at the same concurrency in this run. "
                "Client and server share the machine's cores: read the ratios, not the "
                "absolute numbers.\n\n")
        f.write("| tracing | concurrency | infer/s | p50 µs | p99 µs | server CPU µs/req | "
                "throughput vs off | p50 vs off | server CPU vs off | others' CPU % | errors |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in table:
            f.write("| %s | %d | %s | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f | %.0f | %d |\n" % (
                r["tracing"], r["concurrency"], format(round(r["infer_per_sec"]), ","),
                r["p50_us"], r["p99_us"], r["server_cpu_us_per_req"], r["throughput_vs_off"],
                r["p50_vs_off"], r["server_cpu_vs_off"], r["others_cpu_pct"], r["errors"]))
        f.write("\nTraces written over all rounds (both concurrencies and the windows "
                "ptperf discards): %s.\n" % ", ".join(
                    "%s %s" % (label, format(sum(int(v) for k, v in meta.items()
                                                  if k.startswith("traces_%s_" % mode)), ","))
                    for mode, label in MODES))
        f.write("\nOthers' CPU % is the share of the machine's CPU time used by other "
                "processes during the windows (ptperf's other_cpu_pct): this 2-core host is "
                "shared, so differences of a few per cent are noise; rows with much other "
                "load are less reliable.\n")
    print(open(os.path.join(out, "results.md")).read())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
