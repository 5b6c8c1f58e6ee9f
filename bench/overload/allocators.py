"""bench/overload/allocators.py — does resident memory come back after
bursts? The options the overload issue names, on one ptserve build.

    allocators.py --bin BUILD/ptserve --glibc-bin OTHER/ptserve --out DIR
                  [--scale 0.5] [--rounds 5]

attack.py's "rounds" attack (connections each send most of a large body,
stall, and are closed in the middle; `rounds` times) against two builds of
one tree, --bin linking jemalloc (the default, CMakeLists.txt PTS_JEMALLOC)
and --glibc-bin without it (-DPTS_JEMALLOC=OFF, or the build before
jemalloc), started six ways:

  jemalloc, no purge    --bin, PTSERVE_MALLOC_TRIM=0: its own decay only
  jemalloc + purge      --bin as it runs: once the bytes held fell after a
                        burst, every arena is purged (src/core/overload.c)
  glibc, no trim        --glibc-bin, PTSERVE_MALLOC_TRIM=0
  glibc + malloc_trim   --glibc-bin as it runs: malloc_trim(0) instead
  glibc, 2 arenas       --glibc-bin, MALLOC_ARENA_MAX=2, no trim
  mimalloc              --glibc-bin, LD_PRELOAD=libmimalloc.so.2
                        (libmimalloc2.0), no trim

and records the resident size after each round, its peak while the bodies
are held, and the resident size at start. Writes DIR/allocators.md and
DIR/allocators.json. mimalloc is installed with apt-get when missing
(bench only).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack  # noqa: E402

LIBS = {"mimalloc": ("libmimalloc2.0", "/usr/lib/*/libmimalloc.so.2*")}


def library(name):
    package, pattern = LIBS[name]
    found = sorted(glob.glob(pattern))
    if not found:
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", package],
                       check=True, stdout=subprocess.DEVNULL)
        found = sorted(glob.glob(pattern))
    if not found:
        raise SystemExit("allocators.py: %s not found after installing %s" % (pattern, package))
    return found[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="a build that links jemalloc")
    ap.add_argument("--glibc-bin", required=True, help="a build with glibc's malloc")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    work = os.path.join(a.out, "logs")
    os.makedirs(work, exist_ok=True)
    conns = max(2, int(60 * a.scale))
    declared, sent = int(60 * attack.MB * a.scale), int(50 * attack.MB * a.scale)
    no_trim = {"PTSERVE_MALLOC_TRIM": "0"}
    variants = [
        ("jemalloc, no purge", a.bin, no_trim),
        ("jemalloc + arena purge (default)", a.bin, {}),
        ("glibc, no trim", a.glibc_bin, no_trim),
        ("glibc + malloc_trim", a.glibc_bin, {}),
        ("glibc, 2 arenas, no trim", a.glibc_bin, dict(no_trim, MALLOC_ARENA_MAX="2")),
        ("mimalloc, no trim", a.glibc_bin, dict(no_trim, LD_PRELOAD=library("mimalloc"))),
    ]
    res = {"scale": a.scale, "conns": conns, "sent_mb": sent // attack.MB, "variants": {}}
    for i, (name, binary, env) in enumerate(variants):
        print("== %s" % name, file=sys.stderr)
        r = attack.attack_rounds(binary, work, "alloc-%d" % i, [], conns, declared, sent,
                                 a.rounds, env=env)
        rss = [mb for _, mb in r["samples"]]
        res["variants"][name] = {"bin": binary, "env": env, "rss_start_mb": round(rss[0]) if rss else None,
                                 "rss_peak_mb": round(max(rss)) if rss else None,
                                 "rss_after_rounds_mb": r["rss_after_rounds_mb"]}
    with open(os.path.join(a.out, "allocators.json"), "w") as f:
        json.dump(res, f, indent=1)
    out = ["# Memory after bursts, by allocator option\n",
           "Produced by `bench/overload/allocators.py --scale %g` on two builds of one "
           "tree (jemalloc linked, and glibc's malloc): %d "
           "connections each send %d MB of a larger body, stall, and are closed in the "
           "middle; %d rounds. Resident size (MB) at start, at its peak, and 2.5 s after "
           "each round was closed.\n" % (a.scale, conns, sent // attack.MB, a.rounds),
           "| option | start | peak | " + " | ".join("after %d" % (k + 1)
                                                  for k in range(a.rounds)) + " |",
           "|---|---:|---:|" + "---:|" * a.rounds]
    for name, v in res["variants"].items():
        out.append("| %s | %s | %s | %s |" % (name, v["rss_start_mb"], v["rss_peak_mb"],
                                               " | ".join(str(x) for x in
                                                          v["rss_after_rounds_mb"])))
    with open(os.path.join(a.out, "allocators.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
