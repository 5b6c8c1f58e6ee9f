#!/usr/bin/env bash
# Shared-memory requests through the one-pass header decoder or jansson:
# A/B at concurrency 1, the builds alternating, one server per build,
# load and round, on the CPU.
#   bash docs/experiments/shm-fast-decode/run.sh OUT OLD_BUILD NEW_BUILD [ROUNDS]
# OLD_BUILD and NEW_BUILD hold ptserve (NEW_BUILD's ptperf drives both).
# The model is examples/models/mlp_classifier (16 -> 4, one CPU instance),
# written by examples/gen_models.py with the venv's torch. Each server
# runs with Triton-style timestamp tracing of every request, so the HTTP
# receive span (body read and header decode) is measured apart from the
# rest; the loads are system shared memory, then binary tensors over HTTP.
# Prints one line per run; OUT keeps the CSVs and traces.
set -u
out=$1 old=$2 new=$3 rounds=${4:-3}
root=$(cd "$(dirname "$0")/../../.." && pwd)
repo=$out/repo
mkdir -p "$out"
if [ ! -f "$repo/mlp_classifier/1/model.pt" ]; then
  mkdir -p "$repo" && cp -r "$root/examples/models/mlp_classifier" "$repo/"
  "$root/.venv/bin/python" "$root/examples/gen_models.py" "$out/gen" > /dev/null
  mkdir -p "$repo/mlp_classifier/1" && cp "$out/gen/mlp_classifier/1/model.pt" "$repo/mlp_classifier/1/"
fi
for r in $(seq "$rounds"); do
  for b in old new; do
    [ $b = old ] && dir=$old || dir=$new
    for shm in system none; do
      trace=$out/trace-$b-$shm-$r.json
      "$dir/ptserve" --model-repository "$repo" --http-address 127.0.0.1 --http-port 8133 \
        --allow-grpc false --allow-client-shm=true --trace-config triton,file="$trace" \
        --trace-config level=TIMESTAMPS --trace-config rate=1 > "$out/server-$b-$shm-$r.log" 2>&1 &
      pid=$!
      for _ in $(seq 100); do curl -sf localhost:8133/v2/health/ready > /dev/null && break; sleep 0.1; done
      args=(); [ $shm = none ] || args=(--shared-memory $shm)
      csv="$out/$b-$shm-$r.csv"
      "$new/ptperf" -u 127.0.0.1:8133 -m mlp_classifier "${args[@]}" --concurrency 1 \
        -p 1000 -r 3 -q --server-pid $pid -f "$csv" > /dev/null 2>&1 || echo "ptperf $b $shm $r: rc $?"
      kill $pid; wait $pid
      /usr/bin/python3 - "$trace" "$csv" "$b $shm $r" <<'PY'
import csv, json, statistics, sys
trace, table, tag = sys.argv[1:4]
recv = []
for e in json.load(open(trace)):
    ts = {t["name"]: t["ns"] for t in e.get("timestamps", [])}
    if "HTTP_RECV_START" in ts and "HTTP_RECV_END" in ts:
        recv.append((ts["HTTP_RECV_END"] - ts["HTTP_RECV_START"]) / 1e3)
row = list(csv.DictReader(open(table)))[-1]
print("%s: p50 %s us, server request %s us, HTTP receive p50 %.2f us (%d requests traced)" % (
    tag, row["p50_us"], row["server_request_us"], statistics.median(recv), len(recv)))
PY
    done
  done
done
