# bench/cpu/floor/servers.sh — the two servers bench/cpu/floor/run.sh and
# bench/cpu/haltpoll/run.sh measure side by side: ptserve serving the mlp
# model, and floor.c answering ptperf's requests with the bytes ptserve sent
# for them. Sourced, not run, after bench/lib.sh, with ROOT, PY, BUILD and
# RAW set; the caller's EXIT trap stops both (stop_floor_servers).
#
# start_floor_servers builds ptserve, ptperf and floor (Release), writes the
# model under $RAW/models, starts ptserve (SERVER_PID; HTTP on PORT, gRPC on
# GRPC_PORT), records its answers, starts the floor (FLOOR_PID, FPORT) and
# warms both. pid_of/port_of/answered then name either server by "ptserve"
# or "floor".

SERVER_PID=
FLOOR_PID=

stop_floor_servers() {
  stop_server
  if [ -n "$FLOOR_PID" ]; then kill "$FLOOR_PID" 2>/dev/null || true; fi
  FLOOR_PID=
}

start_floor_servers() {
  local here="$ROOT/bench/cpu/floor"
  log "build (Release) in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DPTS_PYTHON="$PY" >/dev/null
  cmake --build "$BUILD" --target ptserve ptperf -j"${JOBS:-2}" >/dev/null
  mkdir -p "$RAW/models" "$RAW/answers"
  cc -O2 -Wall -Wextra -o "$RAW/floor" "$here/floor.c"
  "$PY" "$ROOT/bench/cpu/gen_models.py" "$RAW/all" >/dev/null
  mv "$RAW/all/mlp" "$RAW/models/"
  rm -rf "$RAW/all"

  PORT="$(free_port)"
  GRPC_PORT="$(free_port)"
  "$BUILD/ptserve" --model-repository "$RAW/models" --http-port "$PORT" \
    --grpc-port "$GRPC_PORT" --metrics-port "$(free_port)" >"$RAW/server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "http://127.0.0.1:$PORT/v2/models/mlp/ready" "$SERVER_PID" "$RAW/server.log"

  # The floor's answers: ptserve's own responses, status line and headers
  # included, to the requests ptperf makes (its infer request is the one
  # ptperf sends for mlp: the JSON header, then 16 FP32 values).
  local a="$RAW/answers"
  "$PY" - "$a/request.bin" <<'PYEOF'
import json, struct, sys
head = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                               "parameters": {"binary_data_size": 64}}],
                   "parameters": {"binary_data_output": True}}, separators=(",", ":")).encode()
open(sys.argv[1], "wb").write(head + struct.pack("16f", *[i / 16 for i in range(16)]))
print(len(head), file=open(sys.argv[1] + ".hlen", "w"))
PYEOF
  curl -sf -i "http://127.0.0.1:$PORT/v2/models/mlp" >"$a/metadata.http"
  curl -sf -i "http://127.0.0.1:$PORT/v2/models/mlp/config" >"$a/config.http"
  curl -sf -i -H "Content-Type: application/octet-stream" \
    -H "Inference-Header-Content-Length: $(cat "$a/request.bin.hlen")" \
    --data-binary @"$a/request.bin" "http://127.0.0.1:$PORT/v2/models/mlp/infer" >"$a/infer.http"
  grep -q '^HTTP/1.1 200' "$a/infer.http" || { echo "servers.sh: ptserve's infer answer is not 200" >&2; return 1; }

  FPORT="$(free_port)"
  "$RAW/floor" "$FPORT" "$a" 2>"$RAW/floor.log" &
  FLOOR_PID=$!
  local _
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$FPORT/floor/count" && break; sleep 0.05; done

  # Both servers warm: TorchScript's first runs profile the graph.
  local s
  for s in ptserve floor; do
    "$BUILD/ptperf" -m mlp -u "127.0.0.1:$(port_of $s)" -q --no-server-stats -p 1000 -r 3 -s 100 \
      --concurrency 4 >/dev/null 2>&1
  done
}

pid_of() { [ "$1" = ptserve ] && echo "$SERVER_PID" || echo "$FLOOR_PID"; }
port_of() { [ "$1" = ptserve ] && echo "$PORT" || echo "$FPORT"; }
answered() { # SERVER: requests it has answered so far
  if [ "$1" = ptserve ]; then
    model_answered "$PORT" mlp
  else
    curl -sf "http://127.0.0.1:$FPORT/floor/count"
  fi
}
