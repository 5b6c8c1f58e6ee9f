#!/usr/bin/env bash
# bench/gpu/inline_ab.sh [RAW_DIR] — run to completion on CUDA instances
# (the event loop that received a request runs it on an idle instance;
# backend.h lendable) against the instance threads only
# (PTSERVE_INLINE_MAX_US=0), on the small MLP (bench/gpu/env_ab.sh says how).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
AB_COMMAND=inline_ab.sh \
AB_A="threads PTSERVE_INLINE_MAX_US=0" \
AB_B="inline PTSERVE_INLINE_MAX_US=1000" \
AB_WHAT="inline: a request that finds the CUDA instance idle and nothing queued runs on the event loop that received it (run to completion, the default); threads: PTSERVE_INLINE_MAX_US=0, every request handed to the instance thread, as CUDA instances always were before" \
CS="${CS:-1,4,16}" \
  exec "$ROOT/bench/gpu/env_ab.sh" "${1:-$ROOT/bench/gpu/results/inline-ab}"
