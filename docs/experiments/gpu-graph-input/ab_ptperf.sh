#!/usr/bin/env bash
# The same A/B with ptperf, at concurrency 1, from CUDA shared memory,
# system shared memory and HTTP binary tensors, one server per build and
# round (the builds alternate):
#   bash docs/experiments/gpu-graph-input/ab_ptperf.sh OUT OLD_BUILD NEW_BUILD [ROUNDS]
# NEW_BUILD's ptperf drives both. Prints one line per run; OUT keeps the CSVs.
set -u
out=$1 old=$2 new=$3 rounds=${4:-3}
repo=/tmp/pts-graph-input-repo
models=${BENCH_MODELS:-/tmp/pts-bench-gpu-models}
[ -d $repo/resnet50_fp16_graph ] || { mkdir -p $repo && cp -r $models/resnet50_fp16_graph $repo/; }
site=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
export PTPERF_CUDART=${PTPERF_CUDART:-$(find "$site" -name 'libcudart.so*' | head -1)}
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for b in old new; do
    [ $b = old ] && dir=$old || dir=$new
    "$dir/ptserve" --model-repository $repo --http-address 127.0.0.1 --http-port 8123 \
      --allow-grpc false --allow-client-shm=true > "$out/server-$b-$r.log" 2>&1 &
    pid=$!
    for _ in $(seq 150); do curl -sf localhost:8123/v2/health/ready > /dev/null && break; sleep 0.2; done
    for shm in cuda system none; do
      args=(); [ $shm = none ] || args=(--shared-memory $shm)
      csv="$out/$b-$shm-$r.csv"
      "$new/ptperf" -u 127.0.0.1:8123 -m resnet50_fp16_graph "${args[@]}" --concurrency 1 \
        -p 1000 -r 3 -q --server-pid $pid -f "$csv" > /dev/null 2>&1 || echo "ptperf $b $shm $r: rc $?"
      tail -1 "$csv" | awk -F, -v t="$b $shm $r" '{printf "%s: p50 %s us, queue %s input %s infer %s output %s\n", t, $6, $16, $17, $18, $19}'
    done
    kill $pid; wait $pid
  done
done
