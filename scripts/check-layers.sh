#!/bin/sh
# scripts/check-layers.sh — dependencies between the areas of src/ point one
# way, down the layers (docs/internals/repository.md, "Layers"):
#
#   main.c
#   server            (server/run.c also starts the frontends and metrics)
#   frontend/*, metrics
#   ensemble          (runs ensembles' steps on the repository's models)
#   repository
#   scheduler
#   backends/*, backend_api (the interface the backends implement)
#   trace, config, shm (shared-memory regions), net (sockets, libevent glue),
#   cache (the response cache)
#   tensor
#   core
#
# Each area may include the areas listed for it below and nothing else; a
# lower layer that must call up gets a callback or an opaque handle from
# the layer above (the scheduler's release_hold, for example).
#
# Within an area, files call each other one way too: given a build
# directory, no circle of source files may call each other's functions
# (A.c calls a function of B.c, which calls one of A.c, directly or around
# a longer ring). Include lines can not show that (two files that share a
# private header call each other without including each other's), so this
# part reads the objects the build made: each object's defined and
# undefined symbols (nm), an edge from the file that uses a symbol to the
# file that defines it, and the strongly connected components of that
# graph. A circle is broken with a callback, a small module of shared code,
# or one file where the split was artificial (docs/internals/README.md).
#
#   scripts/check-layers.sh [BUILD_DIR]
#
# ctest runs it as the `layers` test with its build directory. Exit status
# 1, with each offending include or circle named, when a rule is broken.
set -u
BUILD_DIR=${1:-}
[ -z "$BUILD_DIR" ] || BUILD_DIR=$(cd "$BUILD_DIR" && pwd) || exit 2
cd "$(dirname "$0")/.." || exit 2

allowed() {
  case "$1" in
    core) echo "" ;;
    tensor) echo "core" ;;
    config) echo "core tensor" ;;
    trace) echo "core tensor" ;;
    shm) echo "core tensor" ;;
    net) echo "core" ;;
    cache) echo "core tensor" ;;
    backend_api) echo "core tensor config" ;;
    backends) echo "backend_api backends config trace shm tensor core" ;;
    scheduler) echo "backend_api config trace shm cache tensor core" ;;
    repository) echo "scheduler backend_api config trace tensor core" ;;
    ensemble) echo "repository scheduler backend_api config trace shm tensor core" ;;
    frontend) echo "server scheduler config trace shm net tensor core" ;;
    metrics) echo "server scheduler config trace net cache tensor core" ;;
    server) echo "frontend metrics ensemble repository scheduler backend_api config trace shm net cache tensor core" ;;
    *) echo "ALL" ;;
  esac
}

bad=0
checked=0
for f in $(find src -name '*.c' -o -name '*.h' -o -name '*.cc' | sort); do
  area=$(echo "$f" | cut -d/ -f2)
  ok=$(allowed "$area")
  [ "$ok" = "ALL" ] && continue
  checked=$((checked + 1))
  # Project includes name their area first: #include "scheduler/queue.h".
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/.*/\1/p' "$f" | sort -u); do
    [ "$inc" = "$area" ] && continue
    case " $ok " in
      *" $inc "*) ;;
      *)
        echo "$f: includes $inc/, which is not below $area (allowed: ${ok:-nothing})"
        bad=1
        ;;
    esac
  done
done
if [ "$checked" -eq 0 ]; then
  echo "check-layers: no source files found under src/" >&2
  exit 2
fi
[ "$bad" -eq 0 ] && echo "check-layers: $checked files, every include points down the layers"

# Circles between files, from the build's objects of src/.
if [ -n "$BUILD_DIR" ]; then
  objs=$(find "$BUILD_DIR/CMakeFiles" -path '*/src/*' \( -name '*.c.o' -o -name '*.cc.o' \) | sort)
  if [ -z "$objs" ]; then
    echo "check-layers: no objects of src/ under $BUILD_DIR (build first)" >&2
    exit 2
  fi
  # nm per object: "D <file> <symbol>" for what it defines (code and
  # data), "U <file> <symbol>" for what it uses.
  syms=$(for o in $objs; do
    f=${o#*/src/}
    f=${f%.o}
    [ -f "src/$f" ] || continue # the object of a file since removed or moved
    nm "$o" | awk -v f="$f" '$2 ~ /^[TDBR]$/ { print "D", f, $3 } $1 == "U" { print "U", f, $2 }'
  done)
  circles=$(echo "$syms" | /usr/bin/python3 -c '
import sys
from collections import defaultdict
defs, uses = {}, defaultdict(set)
for line in sys.stdin:
    kind, f, sym = line.split()
    if kind == "D":
        defs[sym] = f
    else:
        uses[f].add(sym)
graph = defaultdict(set)
for f, syms in uses.items():
    for s in syms:
        if s in defs and defs[s] != f:
            graph[f].add(defs[s])
# Tarjan, iteratively: the strongly connected components of the graph.
index, low, stack, on, out, n = {}, {}, [], set(), [], 0
for root in sorted(set(graph) | set(defs.values())):
    if root in index:
        continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = n; n += 1; stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = n; n += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comp.sort()
                edges = ["%s -> %s" % (a, b) for a in comp for b in sorted(graph[a]) if b in comp]
                out.append("circle: %s (%s)" % (", ".join(comp), "; ".join(edges)))
print("\n".join(out))
')
  if [ -n "$circles" ]; then
    echo "$circles"
    bad=1
  else
    echo "check-layers: $(echo "$syms" | awk '{print $2}' | sort -u | wc -l | tr -d ' ') objects, no circle between files"
  fi
fi
exit "$bad"
