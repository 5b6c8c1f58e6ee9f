#!/usr/bin/env bash
# bench/gpu/pipeline_ab.sh — PTSERVE_PIPELINE 0 against 1 on one GPU host,
# in interleaved rounds with one Release build (docs/gpu.md, "Overlap"):
# ResNet-50 FP16 with one instance over HTTP, and the two-instance model
# with CUDA shared memory, at concurrency 1 and 256. Writes per-round
# CSVs to $OUT/ab and prints one summary line per cell: round+switch,
# load, concurrency, infer/s, p50 µs, avg batch, server CPU µs/request,
# compute_input µs/request. Needs build-bench-gpu (bench/gpu/run.sh builds it).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
[ -d .bundle/debs ] && source scripts/use-bundle.sh
B=build-bench-gpu; M=/tmp/ab-models; R=$OUT/ab; mkdir -p $R
[ -d $M ] || python3 bench/gpu/gen_models.py $M >/dev/null
for m in resnet50_fp16; do
  mkdir -p $M/${m}_1i/1; cp $M/$m/1/model.pt $M/${m}_1i/1/
  sed -e "s/count: 2/count: 1/" -e "s/name: \"$m\"/name: \"${m}_1i\"/" $M/$m/config.pbtxt > $M/${m}_1i/config.pbtxt
done
CUDART=$(python3 - <<'P'
import glob,os,site
c=[f for d in site.getsitepackages() for f in glob.glob(os.path.join(d,"nvidia","**","libcudart.so*"),recursive=True)]
print(sorted(c, key=lambda f: "13" not in f)[0] if c else "")
P
)
fp() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
for round in 1 2; do for pipe in 0 1; do
  P=$(fp)
  PTSERVE_PIPELINE=$pipe $B/ptserve --model-repository $M --http-port $P --http-address 127.0.0.1 --grpc-port $(fp) --metrics-port $(fp) \
     --http-thread-count 16 --allow-client-shm=true > $R/server.log 2>&1 &
  SP=$!
  for _ in $(seq 900); do curl -sf -o /dev/null localhost:$P/v2/health/ready && break; sleep 0.1; done
  for m in resnet50_fp16_1i; do
    $B/ptperf -m $m -u 127.0.0.1:$P -p 2000 -r 4 -q --server-pid $SP --concurrency 1,256 -f $R/r${round}p${pipe}_${m}_http.csv >/dev/null 2>&1
  done
  PTPERF_CUDART=$CUDART $B/ptperf -m resnet50_fp16 -u 127.0.0.1:$P -p 2000 -r 4 -q --server-pid $SP --shared-memory cuda --concurrency 1,256 -f $R/r${round}p${pipe}_resnet50_fp16_cudashm.csv > $R/cudashm.log 2>&1 || tail -3 $R/cudashm.log
  kill $SP; wait $SP
done; done
python3 - $R <<'P'
import csv,glob,os,sys
rows=[]
for f in sorted(glob.glob(sys.argv[1]+"/r*.csv")):
  for r in csv.DictReader(open(f)):
    rows.append((os.path.basename(f)[:4], os.path.basename(f)[5:-4], r["concurrency"], r["infer_per_sec"], r["p50_us"], r["server_avg_batch"], r["server_cpu_us"], r["server_compute_input_us"]))
for r in sorted(rows, key=lambda r:(r[1],r[2],r[0])): print(*r)
P
