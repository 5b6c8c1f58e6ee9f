#!/usr/bin/env bash
# The graph's input copy without ATen: A/B at concurrency 1, one device call.
#   bash docs/experiments/gpu-graph-copy/run.sh OUT
# From the checkout on the GPU host (.bundle carried), with the change in
# the tree. Builds three trees side by side, Release, against the host's
# torch: new (this tree, build-bench-gpu: ptserve ptperf bench_inproc
# aoti_ref, what bench/gpu/run.py's BENCH_PREBUILT=1 takes), old (this tree
# with direct-copy.patch taken out, /tmp/gcopy-old) and probe (new plus
# probe.patch, /tmp/gcopy-probe: the input phase's host time printed by the
# server every 1,000 batches). Then the graph tests of tests/gpu on new,
# then gpu-graph-input/ab_ptperf.sh old against new (ROUNDS, 2), then one
# round of new against probe, whose server logs carry the probe's lines.
set -u
out=$1 rounds=${ROUNDS:-2}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
mkdir -p "$out"
source scripts/use-bundle.sh > /dev/null
P=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
for v in old probe; do
  rm -rf /tmp/gcopy-$v && mkdir -p /tmp/gcopy-$v
  tar --exclude=./build --exclude=./build-bench-gpu --exclude=./build-gpu --exclude=./.bundle -cf - . | tar -xf - -C /tmp/gcopy-$v
done
(cd /tmp/gcopy-old && patch -R -p1 -s < "$here/direct-copy.patch") || exit 1
(cd /tmp/gcopy-probe && patch -p1 -s < "$here/probe.patch") || exit 1
build() {  # SRC DIR TARGETS...
  local src=$1 dir=$2; shift 2
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DPTS_PYTHON="$(command -v python3)" -DCMAKE_PREFIX_PATH="$P" > "$out/cmake-$(basename "$dir").log" 2>&1 &&
    cmake --build "$dir" --target "$@" -j6 > "$out/build-$(basename "$dir").log" 2>&1
}
t0=$(date +%s)
build . build-bench-gpu ptserve ptperf bench_inproc aoti_ref & b1=$!
build /tmp/gcopy-old /tmp/gcopy-old/build ptserve & b2=$!
build /tmp/gcopy-probe /tmp/gcopy-probe/build ptserve & b3=$!
models=${BENCH_MODELS:-/tmp/pts-bench-gpu-models}
[ -d "$models/resnet50_fp16_graph" ] || python3 bench/gpu/gen_models.py "$models" > "$out/gen.log" 2>&1
ok=1
for b in $b1 $b2 $b3; do wait $b || ok=0; done
ln -sf "$root/build-bench-gpu/ptperf" /tmp/gcopy-probe/build/ptperf
echo "builds and models: $(( $(date +%s) - t0 )) s"
[ $ok = 1 ] || { tail -20 "$out"/build-*.log; exit 1; }
python3 -m pip install -q --root-user-action=ignore --no-deps --no-index --target /tmp/py \
  .bundle/wheels/tritonclient-*.whl .bundle/wheels/python_rapidjson-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/py PTS_MODELS_PYTHON=$(command -v python3) PTSERVE_BIN=$root/build-bench-gpu/ptserve \
  timeout 200 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_shm_cuda.py \
  tests/gpu/test_cuda.py -k graph > "$out/graph-tests.log" 2>&1
echo "graph tests: rc $?"; tail -4 "$out/graph-tests.log"
bash docs/experiments/gpu-graph-input/ab_ptperf.sh "$out/ab" /tmp/gcopy-old/build "$root/build-bench-gpu" "$rounds"
bash docs/experiments/gpu-graph-input/ab_ptperf.sh "$out/probe" "$root/build-bench-gpu" /tmp/gcopy-probe/build 1
grep -h "^probe:" "$out"/probe/server-new-1.log
