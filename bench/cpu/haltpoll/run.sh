#!/usr/bin/env bash
# bench/cpu/haltpoll/run.sh — what a KVM guest's halt polling does to a
# request at low concurrency (issue #13; docs/benchmarks.md, "Guest halt
# polling").
#
#   sudo bench/cpu/haltpoll/run.sh   (HALTPOLL_NS, default "0 50000 200000";
#                                     ROUNDS, default 3; BENCH_INTERVAL_MS, 1000)
#
# On a KVM guest whose idle driver is cpuidle-haltpoll, a virtual CPU with
# nothing to run polls for up to guest_halt_poll_ns before it halts. A
# halted virtual CPU costs whoever wakes it a trip through the hypervisor,
# and the woken thread runs on cold caches; at c=1 every request and every
# reply is such a wake-up (bench/cpu/floor). Some platforms boot their
# guests with the polling off (haltpoll.guest_halt_poll_ns=0 on this
# build VM's command line). This script sets
# /sys/module/haltpoll/parameters/guest_halt_poll_ns to each value of
# HALTPOLL_NS in turn (root only) and puts the machine's own value back on
# exit.
#
# Per round, for each value (their order alternating between rounds), the
# same ptperf runs against ptserve (HTTP, gRPC, gRPC streaming) and against
# floor.c (HTTP) at c=1 and c=4: infer/s, p50, the server's and ptperf's CPU
# per request (ptperf --server-pid), ptserve's time in the model's forward
# (its statistics endpoint's compute_infer), and the time the virtual CPUs spent
# polling (cpuidle state POLL, every CPU, over the ptperf run) ÷ the
# requests the server answered meanwhile. Polling runs in the idle task: no
# process is charged for it and /proc/stat counts it as idle, but the host
# sees a busy virtual CPU, so it is reported beside the CPU the processes
# used.
#
# Writes bench/cpu/haltpoll/results/{results.csv,results.md,plot.png}; raw
# files stay in bench/cpu/haltpoll/results/raw (not committed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$ROOT/bench/cpu/haltpoll"
OUT="$HERE/results"
RAW="$OUT/raw"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
PY=${PYTHON:-$ROOT/.venv/bin/python}
ROUNDS="${ROUNDS:-3}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
read -r -a SETTINGS <<<"${HALTPOLL_NS:-0 50000 200000}"
KNOB=/sys/module/haltpoll/parameters/guest_halt_poll_ns
source "$ROOT/bench/lib.sh"              # log, stop_server, free_port, wait_ready, model_answered, ptperf_proto_args
source "$ROOT/bench/cpu/floor/servers.sh" # start_floor_servers, stop_floor_servers, pid_of, port_of, answered

[ -w "$KNOB" ] || {
  echo "run.sh: $KNOB is not writable here: this needs root on a KVM guest whose idle driver is" \
    "cpuidle-haltpoll ($(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo 'no cpuidle'))" >&2
  exit 1
}
ORIGINAL="$(cat "$KNOB")"
cleanup() {
  echo "$ORIGINAL" >"$KNOB" || true
  stop_floor_servers
}
trap cleanup EXIT

# Microseconds every CPU has spent in cpuidle's POLL state so far.
poll_us() {
  cat /sys/devices/system/cpu/cpu*/cpuidle/state0/time | awk '{s += $1} END {print s + 0}'
}
grep -qx POLL /sys/devices/system/cpu/cpu0/cpuidle/state0/name ||
  { echo "run.sh: cpuidle state0 is not POLL here" >&2; exit 1; }

rm -rf "$RAW"
mkdir -p "$RAW"
start_floor_servers

echo "setting_ns,server,protocol,concurrency,round,answered,poll_us" >"$RAW/poll.csv"
measure() { # NS SERVER PROTO C ROUND
  local ns="$1" s="$2" proto="$3" c="$4" r="$5" a0 a1 p0 p1 stats=
  [ "$s" = floor ] && stats=--no-server-stats # floor.c has no statistics endpoint
  a0="$(answered "$s")"
  p0="$(poll_us)"
  # shellcheck disable=SC2046
  "$BUILD/ptperf" -m mlp -u "127.0.0.1:$(port_of "$s")" $(ptperf_proto_args "$proto" "$GRPC_PORT") -q $stats \
    -p "$INTERVAL_MS" --concurrency "$c" --server-pid "$(pid_of "$s")" \
    -f "$RAW/ptperf_${ns}_${s}_${proto}_c${c}_r${r}.csv" >>"$RAW/ptperf.log" 2>&1
  p1="$(poll_us)"
  a1="$(answered "$s")"
  echo "$ns,$s,$proto,$c,$r,$((a1 - a0)),$((p1 - p0))" >>"$RAW/poll.csv"
}

for r in $(seq 1 "$ROUNDS"); do
  order=("${SETTINGS[@]}")
  if [ $((r % 2)) -eq 0 ]; then # every other round, the values in reverse
    order=()
    for ((i = ${#SETTINGS[@]} - 1; i >= 0; i--)); do order+=("${SETTINGS[i]}"); done
  fi
  for ns in "${order[@]}"; do
    echo "$ns" >"$KNOB"
    sleep 0.5 # the polling window adapts (grow/shrink) to the new limit
    for c in 1 4; do
      for cell in "ptserve http" "ptserve grpc" "ptserve stream" "floor http"; do
        set -- $cell
        log "round $r guest_halt_poll_ns=$ns c=$c $1 $2"
        measure "$ns" "$1" "$2" "$c" "$r"
      done
    done
  done
done

{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "tree=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src || echo +)"
  echo "cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), family $(sed -n 's/^cpu family\s*: //p' /proc/cpuinfo | head -n1)"
  echo "cores=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "idle_driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver)"
  echo "original_ns=$ORIGINAL"
  for p in grow grow_start shrink allow_shrink; do
    echo "$p=$(cat "/sys/module/haltpoll/parameters/guest_halt_poll_$p")"
  done
  echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rounds=$ROUNDS"
  echo "settings=${SETTINGS[*]}"
} >"$RAW/meta.txt"
"$PY" "$HERE/report.py" "$RAW" "$OUT"
