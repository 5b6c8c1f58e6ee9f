# bench/lib.sh — shell helpers of the scenarios still written in shell
# (gpu, triton, aoti); the Python ones use bench/harness.py. Sourced, not
# run: `source "$ROOT/bench/lib.sh"` after the script has set PY (the
# interpreter free_port uses) and SERVER_PID (empty, or the server it runs).
# The caller sets its own EXIT trap (most use `trap stop_server EXIT`).

log() { printf '== [%ss] %s\n' "$SECONDS" "$*" >&2; }

# Stops the server the script started, if any, and waits for it to exit.
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}

# Waits (at most 60 s) until URL answers 200; fails with the server's log
# if process PID exits first.
wait_ready() { # URL PID LOG
  local _
  for _ in $(seq 1 600); do
    curl -sf -o /dev/null "$1" && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; return 1; }
    sleep 0.1
  done
  echo "$1 did not become ready" >&2
  return 1
}

# Requests model MODEL has answered so far (success + fail), from the
# statistics endpoint of the server on 127.0.0.1:PORT.
model_answered() { # PORT MODEL
  curl -sf --retry 5 --retry-all-errors "http://127.0.0.1:$1/v2/models/$2/stats" |
    "$PY" -c 'import json,sys; s=json.load(sys.stdin)["model_stats"][0]["inference_stats"]; print(s["success"]["count"] + s["fail"]["count"])'
}

# ptperf's arguments for protocol PROTO against a server on 127.0.0.1:
# http (ptperf's default: none), grpc (ModelInfer on GRPC_PORT) or stream
# (ModelStreamInfer on GRPC_PORT, one stream per request in flight).
ptperf_proto_args() { # PROTO GRPC_PORT
  case "$1" in
    grpc) echo "-i grpc --grpc-url 127.0.0.1:$2" ;;
    stream) echo "-i grpc --grpc-url 127.0.0.1:$2 --streaming" ;;
  esac
}

# "user system" CPU ticks of process PID so far (proc(5): fields 14 and 15;
# the fields are counted after the command name, which may hold spaces).
cpu_ticks() { # PID
  sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12, $13}'
}

# A TCP port free on 127.0.0.1 at this moment.
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Percent of all CPU time that was busy over the next second (/proc/stat).
cpu_busy_pct() {
  local a b total=0 idle i
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -r -a b < <(grep '^cpu ' /proc/stat)
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(((total - idle) * 100 / (total > 0 ? total : 1)))
}
