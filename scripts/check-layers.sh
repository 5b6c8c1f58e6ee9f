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
#   backends/*, backend
#   trace, config, shm (shared-memory regions), net (sockets, libevent glue),
#   cache (the response cache)
#   tensor
#   core
#
# Each area may include the areas listed for it below and nothing else; a
# lower layer that must call up gets a callback or an opaque handle from
# the layer above (the scheduler's release_hold, for example). Run from the
# repository root (ctest runs it as the `layers` test). Exit status 1, with
# each offending include named, when a rule is broken.
set -u
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
    backend) echo "core tensor config" ;;
    backends) echo "backend backends config trace shm tensor core" ;;
    scheduler) echo "backend config trace shm cache tensor core" ;;
    repository) echo "scheduler backend config trace tensor core" ;;
    ensemble) echo "repository scheduler backend config trace shm tensor core" ;;
    frontend) echo "server scheduler config trace shm net tensor core" ;;
    metrics) echo "server scheduler config trace net cache tensor core" ;;
    server) echo "frontend metrics ensemble repository scheduler backend config trace shm net cache tensor core" ;;
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
exit "$bad"
