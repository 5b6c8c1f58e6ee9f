#!/usr/bin/env bash
# bench/gpu/spin_ab.sh [RAW_DIR] — the timed wait's spin on small batches
# (torch_bridge.cc wait_end, PTSERVE_CUDA_SPIN_BELOW_US) against the timed
# wait without it, on the small MLP (bench/gpu/env_ab.sh says how).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
AB_COMMAND=spin_ab.sh \
AB_A="nospin PTSERVE_CUDA_WAIT=timed PTSERVE_CUDA_SPIN_BELOW_US=0" \
AB_B="spin PTSERVE_CUDA_WAIT=timed PTSERVE_CUDA_SPIN_BELOW_US=200" \
AB_WHAT="spin: the default timed wait, which polls without sleeping a batch the device finished in under 200 µs last time; nospin: PTSERVE_CUDA_SPIN_BELOW_US=0, the timed wait before, which polls with 10 µs sleeps" \
  exec "$ROOT/bench/gpu/env_ab.sh" "${1:-$ROOT/bench/gpu/results/spin-ab}"
