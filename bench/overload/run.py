"""bench/overload/run.py — the overload issue's attacks against the build
before the overload work and the current tree; the figures of
docs/reliability.md ("Overload").

    .venv/bin/python bench/overload/run.py     (or bench/harness.py overload)

Builds the current tree without LibTorch (the identity backend serves the
attacks) in build-bench-overload/ and BENCH_BEFORE_REF (default 9ee7bae,
the last commit without the overload work) in build-bench-overload-before/
(kept once built), or takes BENCH_BEFORE_BIN / BENCH_AFTER_BIN as given;
then runs bench/overload/attack.py's attacks at the issue's sizes times
BENCH_SCALE (default 1: 60 connections, 50 of 60 MB each, about 3 GB held
at once by the build before):

  fds     prlimit --nofile=512, 584 idle connections to the HTTP port
          (default flags, then the limits lifted so the descriptors run
          out), and the same against the gRPC port;
  memory  the stalled bodies held (the after build also with
          --request-memory-budget 1 GiB);
  rounds  five rounds of that, each closed in the middle.

Writes bench/overload/results/{results.md,results.json,rss.png} (server logs
in results/logs/, not committed). Needs prlimit (util-linux) and the venv
(tritonclient, matplotlib).
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness as h  # noqa: E402
import attack as a  # noqa: E402

MB = a.MB
NO_TORCH = "-DPTS_WITH_TORCH=OFF"


def builds():
    after = os.environ.get("BENCH_AFTER_BIN") or os.path.join(h.build(
        os.path.join(h.ROOT, "build-bench-overload"), ["ptserve"], NO_TORCH), "ptserve")
    ref = os.environ.get("BENCH_BEFORE_REF", "9ee7bae")
    before = os.environ.get("BENCH_BEFORE_BIN") or os.path.join(h.build_ref(
        ref, os.path.join(h.ROOT, "build-bench-overload-before"), ["ptserve"], NO_TORCH),
        "ptserve")
    return before, after, ref


def measure(before, after, work, scale):
    conns = max(2, int(60 * scale))
    declared, sent = int(60 * MB * scale), int(50 * MB * scale)
    lifted = ["--http-max-connections", 100000, "--grpc-max-connections", 100000]
    res = {"scale": scale}
    h.log("descriptors")
    res["fds"] = {
        "before, HTTP": a.attack_fds(before, work, "fds-before-http", [], "http", 584),
        "after, HTTP": a.attack_fds(after, work, "fds-after-http", [], "http", 584),
        "after, HTTP, limits lifted": a.attack_fds(after, work, "fds-after-http-lifted",
                                                   lifted, "http", 584),
        "before, gRPC": a.attack_fds(before, work, "fds-before-grpc", [], "grpc", 584),
        "after, gRPC, limits lifted": a.attack_fds(after, work, "fds-after-grpc-lifted",
                                                   lifted, "grpc", 584),
    }
    h.log("memory")
    budget = ["--request-memory-budget", 1 << 30]
    res["memory"] = {
        "before": a.attack_memory(before, work, "mem-before", [], conns, declared, sent),
        "after, default budget": a.attack_memory(after, work, "mem-after", [], conns,
                                                 declared, sent),
        "after, 1 GiB budget": a.attack_memory(after, work, "mem-after-1g", budget, conns,
                                               declared, sent),
    }
    h.log("rounds")
    res["rounds"] = {
        "before": a.attack_rounds(before, work, "rounds-before", [], conns, declared, sent, 5),
        "after": a.attack_rounds(after, work, "rounds-after", [], conns, declared, sent, 5),
    }
    return res, conns, declared // MB, sent // MB


def report(res, meta, out, conns, declared, sent):
    fds, mem, rnd = res["fds"], res["memory"], res["rounds"]
    h.write_md(os.path.join(out, "results.md"), [
        "# Overload attacks, before and after", "",
        "Produced by `%s` on %s, ptserve `%s` against `%s` (the build before the overload "
        "work); machine: %s CPUs (%s), load average before %s, after %s; shared with other "
        "work, so compare the builds, not the absolute values. Scale %g: %d connections, "
        "%d of %d MB each." % (meta["command"], meta["date"], meta["commit"], meta["before_ref"],
                               meta["cpus"], meta["cpu_model"], meta["load_before"],
                               meta["load_after"], res["scale"], conns, sent, declared), "",
        "## Descriptors exhausted (prlimit --nofile=512, 584 idle connections)", "",
        *h.table([("build", lambda k: k),
                  ("CPU s per s", lambda k: "%.3f" % fds[k]["cpu_per_s"]),
                  ("log lines during the attack", lambda k: str(fds[k]["log_lines_attack"])),
                  ("answers again after the clients go", lambda k: "no (20 s)"
                   if fds[k]["recovered_s"] is None else "yes, %.1f s" % fds[k]["recovered_s"])],
                 list(fds), left=(0, 3)), "",
        "## Bodies held (%d connections stall after %d of %d MB)" % (conns, sent, declared), "",
        *h.table([("build", lambda k: k),
                  ("RSS before (MB)", lambda k: str(mem[k]["rss_start_mb"])),
                  ("RSS while held (MB)", lambda k: str(mem[k]["rss_held_mb"])),
                  ("admitted", lambda k: str(mem[k]["admitted"])),
                  ("refused", lambda k: str(mem[k]["refused"])),
                  ("first answer", lambda k: mem[k]["answer"] or "—")], list(mem),
                 left=(0, 5)), "",
        "## Five rounds, each closed in the middle: RSS after each round (MB)", "",
        *h.table([("build", lambda k: k)] +
                 [(str(i + 1), (lambda i: lambda k: str(rnd[k]["rss_after_rounds_mb"][i]))(i))
                  for i in range(5)], list(rnd)), "",
        "![resident size over the rounds](rss.png)", ""])
    plt = h.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, v in rnd.items():
        ax.plot([t for t, _ in v["samples"]], [m for _, m in v["samples"]], label=k)
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident size (MB)")
    ax.set_title("Five rounds of stalled %d MB bodies, each closed in the middle" % sent)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rss.png"), dpi=100)


def main():
    out = os.environ.get("BENCH_RESULTS", os.path.join(HERE, "results"))
    work = os.path.join(out, "logs")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    scale = h.env("SCALE", 1.0)
    before, after, ref = builds()
    meta = h.meta(os.path.join(work, "meta.txt"), before_ref=ref,
                  command="BENCH_SCALE=%g bench/overload/run.py" % scale)
    res, conns, declared, sent = measure(before, after, work, scale)
    meta["load_after"] = h.loadavg()
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    report(res, meta, out, conns, declared, sent)
    h.log("report in %s/results.md" % out)


if __name__ == "__main__":
    main()
