# Sourced by hold.sh and variant.sh: starts BIN (an ASan build) on PORT
# (gRPC PORT+1 = GP, metrics PORT+2) over the repository in W/repo, its
# log in W/server.log, waits until it is ready (SP: its pid), and sets
# MARGS, perf_analyzer's measure for MEASURE (count: --request-count 200,
# the e2e test before 129f03b; windows: count windows, the test since).
export ASAN_OPTIONS=detect_leaks=1:detect_odr_violation=0:alloc_dealloc_mismatch=0
export LSAN_OPTIONS=suppressions=$ROOT/tests/lsan.supp:print_suppressions=0
$BIN --model-repository $W/repo --http-port $PORT --grpc-port $GP --metrics-port $((PORT+2)) \
  --grpc-address 127.0.0.1 > $W/server.log 2>&1 &
SP=$!
for i in $(seq 120); do curl -sf localhost:$PORT/v2/health/ready && break; sleep 1; done
case $MEASURE in
  count) MARGS="--request-count 200" ;;
  windows) MARGS="--measurement-mode count_windows --measurement-request-count 200 --stability-percentage 1000" ;;
esac
