#!/usr/bin/env bash
# bench/gpu/quick_compare.sh BASE_SRC NEW_SRC [RAW_DIR] — a short A/B of two
# ptserve source trees on one GPU host (issue 12): FP16 ResNet-50 in process
# at batch 32 and 128, then each tree's ptserve over HTTP at concurrency
# 128, 256, 512 (binary tensors), and NEW_SRC's also with system shared
# memory (ptperf --shared-memory system). The load generator and the
# in-process reference are NEW_SRC's for both. Much shorter than run.sh
# (2 s windows, at most 6 per point): a quick check, not the benchmark.
set -uo pipefail
BASE="$(cd "$1" && pwd)"; NEW="$(cd "$2" && pwd)"
RAW="${3:-$NEW/bench/gpu/results/shm-quick}"
mkdir -p "$RAW"
[ -d "$NEW/.bundle/debs" ] && source "$NEW/scripts/use-bundle.sh"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
M=/tmp/qb-models
python3 "$NEW/bench/gpu/gen_models.py" "$M" >/dev/null
for t in base new; do
  src=$BASE; [ $t = new ] && src=$NEW
  cmake -S "$src" -B /tmp/qb-$t -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$TP" >/dev/null
  cmake --build /tmp/qb-$t --target ptserve ptperf bench_inproc -j"$(nproc)" >/dev/null || exit 1
done
echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
for b in 128 32; do
  /tmp/qb-new/bench_inproc --device cuda:0 --model $M/resnet50_fp16/1/model.pt \
    --input FP16:$b,3,224,224 --label inproc_fp16_b$b --seconds 3 --warmup 30 \
    --csv "$RAW/inproc.csv" >/dev/null
done
fp() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
for t in base new; do
  P=$(fp); extra=; [ $t = new ] && extra=--allow-client-shm=true
  /tmp/qb-$t/ptserve --model-repository $M --http-port "$P" --http-address 127.0.0.1 \
    --grpc-port "$(fp)" --metrics-port "$(fp)" --http-thread-count 16 $extra >/dev/null 2>&1 &
  SP=$!
  for _ in $(seq 600); do curl -sf -o /dev/null "localhost:$P/v2/health/ready" && break; sleep 0.1; done
  modes=bin; [ $t = new ] && modes="bin shm"
  for mode in $modes; do
    a=; [ $mode = shm ] && a="--shared-memory system"
    /tmp/qb-new/ptperf -m resnet50_fp16 -u "127.0.0.1:$P" -p 2000 -r 6 -q --server-pid "$SP" \
      --concurrency 128,256,512 $a -f "$RAW/ptperf-$t-$mode.csv"
  done
  kill "$SP"; wait "$SP"
done
