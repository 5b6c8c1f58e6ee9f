/* main.c — ptserve's command line: tritonserver's flag names and defaults.
 *
 * Every flag ptserve understands is parsed and range-checked here; every
 * other tritonserver flag is recognised by name and refused with a message
 * that says why (a flag silently ignored would make a deployment behave
 * differently from what its command line says). SIGINT and SIGTERM stop the
 * server gracefully: in-flight requests are answered, everything is freed,
 * and the exit status is 0.
 *
 * Threading: main thread only, plus the async-signal-safe handler.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cache/cache.h"
#include "config/json_arena.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "core/header_forward.h"
#include "core/host_policy.h"
#include "core/log.h"
#include "core/metrics_config.h"
#include "core/pinned.h"
#include "frontend/grpc/grpc.h"
#include "frontend/http/restrict.h"
#include "net/tls.h"
#include "scheduler/rate_limit.h"
#include "server/server.h"
#include "trace/trace.h"

enum {
  OPT_HELP = 1000,
  OPT_VERSION,
  OPT_MODEL_REPOSITORY,
  OPT_LOG_VERBOSE,
  OPT_LOG_INFO,
  OPT_LOG_WARNING,
  OPT_LOG_ERROR,
  OPT_LOG_FORMAT,
  OPT_LOG_FILE,
  OPT_STRICT_READINESS,
  OPT_EXIT_ON_ERROR,
  OPT_ALLOW_HTTP,
  OPT_HTTP_PORT,
  OPT_REUSE_HTTP_PORT,
  OPT_HTTP_ADDRESS,
  OPT_HTTP_THREAD_COUNT,
  OPT_HTTP_MAX_INPUT_SIZE,
  OPT_HTTP_MAX_HEADER_SIZE,
  OPT_HTTP_TIMEOUT_SECS,
  OPT_HTTP_MAX_CONNECTIONS,
  OPT_DEFAULT_MAX_QUEUE_SIZE,
  OPT_REQUEST_MEMORY_BUDGET,
  OPT_PINNED_MEMORY_POOL,
  OPT_GRPC_MAX_CONNECTIONS,
  OPT_HTTP_RESTRICTED_API,
  OPT_GRPC_RESTRICTED_PROTOCOL,
  OPT_EXIT_TIMEOUT_SECS,
  OPT_EXIT_DRAIN_SECS,
  OPT_METRICS_ADDRESS,
  OPT_METRICS_PORT,
  OPT_METRICS_INTERVAL_MS,
  OPT_METRICS_CONFIG,
  OPT_HTTP_HEADER_FORWARD_PATTERN,
  OPT_RATE_LIMIT,
  OPT_RATE_LIMIT_RESOURCE,
  OPT_GRPC_HEADER_FORWARD_PATTERN,
  OPT_GRPC_PORT,
  OPT_GRPC_ADDRESS,
  OPT_REUSE_GRPC_PORT,
  OPT_GRPC_INFER_THREAD_COUNT,
  OPT_GRPC_COMPRESSION_LEVEL,
  OPT_GRPC_KEEPALIVE_TIME,
  OPT_GRPC_KEEPALIVE_TIMEOUT,
  OPT_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS,
  OPT_GRPC_MAX_PINGS_WITHOUT_DATA,
  OPT_GRPC_MIN_RECV_PING_INTERVAL,
  OPT_GRPC_MAX_PING_STRIKES,
  OPT_GRPC_MAX_CONNECTION_AGE,
  OPT_GRPC_MAX_CONNECTION_AGE_GRACE,
  OPT_GRPC_USE_SSL,
  OPT_GRPC_USE_SSL_MUTUAL,
  OPT_GRPC_SERVER_CERT,
  OPT_GRPC_SERVER_KEY,
  OPT_GRPC_ROOT_CERT,
  OPT_TRACE_CONFIG,
  OPT_TRACE_FILE, /* tritonserver's deprecated --trace-<key> spellings */
  OPT_TRACE_LEVEL,
  OPT_TRACE_RATE,
  OPT_TRACE_COUNT,
  OPT_TRACE_LOG_FREQUENCY,
  OPT_PROFILE_DIR,
  OPT_CACHE_CONFIG,
  OPT_RESPONSE_CACHE_BYTE_SIZE,
  OPT_ALLOW_CLIENT_SHM,
  OPT_MODEL_CONTROL_MODE,
  OPT_LOAD_MODEL,
  OPT_REPOSITORY_POLL_SECS,
  OPT_MODEL_LOAD_THREAD_COUNT,
  /* tritonserver flags accepted only with the value that matches ptserve */
  OPT_ALLOW_GRPC,
  OPT_ALLOW_METRICS,
  OPT_ALLOW_GPU_METRICS,
  OPT_ALLOW_CPU_METRICS,
  /* tritonserver flags ptserve does not support at all */
  OPT_UNSUPPORTED,
  OPT_NO_EFFECT,
  OPT_ID,
  OPT_MODEL_CONFIG_NAME,
  OPT_ALLOW_SAGEMAKER,
  OPT_SAGEMAKER_PORT,
  OPT_SAGEMAKER_SAFE_PORT_RANGE,
  OPT_SAGEMAKER_THREAD_COUNT,
  OPT_DISABLE_AUTO_COMPLETE_CONFIG,
  OPT_STRICT_MODEL_CONFIG,
  OPT_MODEL_LOAD_RETRY_COUNT,
  OPT_ALLOW_VERTEX_AI,
  OPT_VERTEX_AI_PORT,
  OPT_VERTEX_AI_THREAD_COUNT,
  OPT_VERTEX_AI_DEFAULT_MODEL,
  OPT_HOST_POLICY,
};

static const struct option long_options[] = {
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {"model-repository", required_argument, NULL, OPT_MODEL_REPOSITORY},
    {"model-store", required_argument, NULL, OPT_MODEL_REPOSITORY},
    {"log-verbose", required_argument, NULL, OPT_LOG_VERBOSE},
    {"log-info", required_argument, NULL, OPT_LOG_INFO},
    {"log-warning", required_argument, NULL, OPT_LOG_WARNING},
    {"log-error", required_argument, NULL, OPT_LOG_ERROR},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"log-file", required_argument, NULL, OPT_LOG_FILE},
    {"strict-readiness", required_argument, NULL, OPT_STRICT_READINESS},
    {"exit-on-error", required_argument, NULL, OPT_EXIT_ON_ERROR},
    {"allow-http", required_argument, NULL, OPT_ALLOW_HTTP},
    {"http-port", required_argument, NULL, OPT_HTTP_PORT},
    {"http-address", required_argument, NULL, OPT_HTTP_ADDRESS},
    {"http-thread-count", required_argument, NULL, OPT_HTTP_THREAD_COUNT},
    {"http-max-input-size", required_argument, NULL, OPT_HTTP_MAX_INPUT_SIZE},
    {"http-max-header-size", required_argument, NULL, OPT_HTTP_MAX_HEADER_SIZE},
    {"http-timeout-secs", required_argument, NULL, OPT_HTTP_TIMEOUT_SECS},
    {"http-max-connections", required_argument, NULL, OPT_HTTP_MAX_CONNECTIONS},
    {"default-max-queue-size", required_argument, NULL, OPT_DEFAULT_MAX_QUEUE_SIZE},
    {"request-memory-budget", required_argument, NULL, OPT_REQUEST_MEMORY_BUDGET},
    {"grpc-max-connections", required_argument, NULL, OPT_GRPC_MAX_CONNECTIONS},
    {"http-restricted-api", required_argument, NULL, OPT_HTTP_RESTRICTED_API},
    {"exit-timeout-secs", required_argument, NULL, OPT_EXIT_TIMEOUT_SECS},
    {"exit-drain-secs", required_argument, NULL, OPT_EXIT_DRAIN_SECS},
    {"model-control-mode", required_argument, NULL, OPT_MODEL_CONTROL_MODE},
    {"allow-grpc", required_argument, NULL, OPT_ALLOW_GRPC},
    {"allow-metrics", required_argument, NULL, OPT_ALLOW_METRICS},
    {"allow-gpu-metrics", required_argument, NULL, OPT_ALLOW_GPU_METRICS},
    {"allow-cpu-metrics", required_argument, NULL, OPT_ALLOW_CPU_METRICS},
    {"allow-client-shm", required_argument, NULL, OPT_ALLOW_CLIENT_SHM},
    /* The rest of tritonserver's flags, so that each gets a clear refusal
     * rather than "unrecognized option". */
    {"load-model", required_argument, NULL, OPT_LOAD_MODEL},
    {"repository-poll-secs", required_argument, NULL, OPT_REPOSITORY_POLL_SECS},
    {"model-config-name", required_argument, NULL, OPT_MODEL_CONFIG_NAME},
    {"disable-auto-complete-config", no_argument, NULL, OPT_DISABLE_AUTO_COMPLETE_CONFIG},
    {"strict-model-config", required_argument, NULL, OPT_STRICT_MODEL_CONFIG},
    {"model-load-thread-count", required_argument, NULL, OPT_MODEL_LOAD_THREAD_COUNT},
    {"model-load-retry-count", required_argument, NULL, OPT_MODEL_LOAD_RETRY_COUNT},
    {"model-namespacing", optional_argument, NULL, OPT_UNSUPPORTED},
    {"enable-peer-access", required_argument, NULL, OPT_NO_EFFECT},
    {"reuse-http-port", required_argument, NULL, OPT_REUSE_HTTP_PORT},
    {"http-header-forward-pattern", required_argument, NULL, OPT_HTTP_HEADER_FORWARD_PATTERN},
    {"grpc-address", required_argument, NULL, OPT_GRPC_ADDRESS},
    {"grpc-port", required_argument, NULL, OPT_GRPC_PORT},
    {"reuse-grpc-port", required_argument, NULL, OPT_REUSE_GRPC_PORT},
    {"grpc-infer-thread-count", required_argument, NULL, OPT_GRPC_INFER_THREAD_COUNT},
    {"grpc-infer-allocation-pool-size", required_argument, NULL, OPT_NO_EFFECT},
    {"grpc-max-response-pool-size", required_argument, NULL, OPT_NO_EFFECT},
    {"grpc-use-ssl", required_argument, NULL, OPT_GRPC_USE_SSL},
    {"grpc-use-ssl-mutual", required_argument, NULL, OPT_GRPC_USE_SSL_MUTUAL},
    {"grpc-server-cert", required_argument, NULL, OPT_GRPC_SERVER_CERT},
    {"grpc-server-key", required_argument, NULL, OPT_GRPC_SERVER_KEY},
    {"grpc-root-cert", required_argument, NULL, OPT_GRPC_ROOT_CERT},
    {"grpc-infer-response-compression-level", required_argument, NULL,
     OPT_GRPC_COMPRESSION_LEVEL},
    {"grpc-keepalive-time", required_argument, NULL, OPT_GRPC_KEEPALIVE_TIME},
    {"grpc-keepalive-timeout", required_argument, NULL, OPT_GRPC_KEEPALIVE_TIMEOUT},
    {"grpc-keepalive-permit-without-calls", required_argument, NULL,
     OPT_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS},
    {"grpc-http2-max-pings-without-data", required_argument, NULL,
     OPT_GRPC_MAX_PINGS_WITHOUT_DATA},
    {"grpc-http2-min-recv-ping-interval-without-data", required_argument, NULL,
     OPT_GRPC_MIN_RECV_PING_INTERVAL},
    {"grpc-http2-max-ping-strikes", required_argument, NULL, OPT_GRPC_MAX_PING_STRIKES},
    {"grpc-max-connection-age", required_argument, NULL, OPT_GRPC_MAX_CONNECTION_AGE},
    {"grpc-max-connection-age-grace", required_argument, NULL,
     OPT_GRPC_MAX_CONNECTION_AGE_GRACE},
    {"grpc-restricted-protocol", required_argument, NULL, OPT_GRPC_RESTRICTED_PROTOCOL},
    {"grpc-header-forward-pattern", required_argument, NULL, OPT_GRPC_HEADER_FORWARD_PATTERN},
    {"metrics-address", required_argument, NULL, OPT_METRICS_ADDRESS},
    {"metrics-port", required_argument, NULL, OPT_METRICS_PORT},
    {"metrics-interval-ms", required_argument, NULL, OPT_METRICS_INTERVAL_MS},
    {"metrics-config", required_argument, NULL, OPT_METRICS_CONFIG},
    {"backend-directory", required_argument, NULL, OPT_NO_EFFECT},
    {"backend-config", optional_argument, NULL, OPT_UNSUPPORTED},
    {"repoagent-directory", required_argument, NULL, OPT_NO_EFFECT},
    {"cache-config", required_argument, NULL, OPT_CACHE_CONFIG},
    {"response-cache-byte-size", required_argument, NULL, OPT_RESPONSE_CACHE_BYTE_SIZE},
    {"cache-directory", required_argument, NULL, OPT_NO_EFFECT},
    {"rate-limit", required_argument, NULL, OPT_RATE_LIMIT},
    {"rate-limit-resource", required_argument, NULL, OPT_RATE_LIMIT_RESOURCE},
    {"pinned-memory-pool-byte-size", required_argument, NULL, OPT_PINNED_MEMORY_POOL},
    {"cuda-memory-pool-byte-size", required_argument, NULL, OPT_NO_EFFECT},
    {"cuda-virtual-address-size", required_argument, NULL, OPT_NO_EFFECT},
    {"min-supported-compute-capability", optional_argument, NULL, OPT_UNSUPPORTED},
    {"buffer-manager-thread-count", required_argument, NULL, OPT_NO_EFFECT},
    {"host-policy", required_argument, NULL, OPT_HOST_POLICY},
    {"model-load-gpu-limit", optional_argument, NULL, OPT_UNSUPPORTED},
    {"trace-config", required_argument, NULL, OPT_TRACE_CONFIG},
    {"trace-file", required_argument, NULL, OPT_TRACE_FILE},
    {"trace-level", required_argument, NULL, OPT_TRACE_LEVEL},
    {"trace-rate", required_argument, NULL, OPT_TRACE_RATE},
    {"trace-count", required_argument, NULL, OPT_TRACE_COUNT},
    {"trace-log-frequency", required_argument, NULL, OPT_TRACE_LOG_FREQUENCY},
    {"profile-dir", required_argument, NULL, OPT_PROFILE_DIR},
    {"allow-sagemaker", required_argument, NULL, OPT_ALLOW_SAGEMAKER},
    {"sagemaker-port", required_argument, NULL, OPT_SAGEMAKER_PORT},
    {"sagemaker-safe-port-range", required_argument, NULL, OPT_SAGEMAKER_SAFE_PORT_RANGE},
    {"sagemaker-thread-count", required_argument, NULL, OPT_SAGEMAKER_THREAD_COUNT},
    {"allow-vertex-ai", required_argument, NULL, OPT_ALLOW_VERTEX_AI},
    {"vertex-ai-port", required_argument, NULL, OPT_VERTEX_AI_PORT},
    {"vertex-ai-thread-count", required_argument, NULL, OPT_VERTEX_AI_THREAD_COUNT},
    {"vertex-ai-default-model", required_argument, NULL, OPT_VERTEX_AI_DEFAULT_MODEL},
    {"id", required_argument, NULL, OPT_ID},
    {NULL, 0, NULL, 0},
};

static const char usage_text[] =
    "Usage: ptserve --model-repository <dir> [options]\n"
    "\n"
    "Serves the PyTorch models of Triton model repositories over KServe v2 HTTP and gRPC.\n"
    "Flags take a value as --flag=value or --flag value; booleans accept\n"
    "true/false, 1/0, on/off.\n"
    "\n"
    "  --model-repository <dir>     Model repository; repeat for several (alias\n"
    "                               --model-store). Required.\n"
    "  --strict-readiness <bool>    Ready only when every model is READY (default true).\n"
    "  --exit-on-error <bool>       Fail start-up when any model fails to load\n"
    "                               (default true).\n"
    "  --model-control-mode <mode>  none (default): every model loads at start-up and\n"
    "                               stays; poll: the same, then the repositories are\n"
    "                               re-read every --repository-poll-secs and changes\n"
    "                               applied; explicit: --load-model at start-up, then\n"
    "                               the repository load/unload API.\n"
    "  --load-model <name>          Explicit mode: load this model at start-up; repeat\n"
    "                               for several, or give '*' alone for every model.\n"
    "  --repository-poll-secs <int> Poll mode: seconds between polls (default 15; 0 =\n"
    "                               never).\n"
    "  --model-load-thread-count <int>\n"
    "                               Models that load at once (default 4).\n"
    "  --allow-http <bool>          Serve HTTP/REST (default true).\n"
    "  --http-address <addr>        Address to bind (default 0.0.0.0).\n"
    "  --http-port <int>            Port (default 8000; 0 = any free port).\n"
    "  --reuse-http-port <bool>     Let several servers share the HTTP port (default false).\n"
    "  --http-thread-count <int>    HTTP event-loop threads (default: one per core, 2 to 8).\n"
    "  --http-max-input-size <int>  Largest request body in bytes (default 67108864).\n"
    "  --http-max-header-size <int> Largest request line plus headers in bytes\n"
    "                               (default 65536; ptserve only).\n"
    "  --http-timeout-secs <int>    Close a connection silent this long: headers, body,\n"
    "                               idle keep-alive, a slow reader (default 60, 0 = never;\n"
    "                               ptserve only).\n"
    "  --http-max-connections <int> Open HTTP connections served at once; more get 503\n"
    "                               with Retry-After (default: from the descriptor\n"
    "                               limit; ptserve only).\n"
    "  --default-max-queue-size <int>\n"
    "                               Requests that may wait in one queue (per model version and\n"
    "                               priority level) whose config sets no max_queue_size; more\n"
    "                               get 503 / UNAVAILABLE at once (default 4096, 0 = unbounded;\n"
    "                               ptserve only).\n"
    "  --request-memory-budget <bytes>\n"
    "                               Request bytes held at once (bodies being read, decoded\n"
    "                               tensors, queued requests; HTTP and gRPC together);\n"
    "                               beyond it new requests get 503 / RESOURCE_EXHAUSTED\n"
    "                               (default: a quarter of the memory; ptserve only).\n"
    "  --pinned-memory-pool-byte-size <bytes>\n"
    "                               Pinned host memory reserved at load for request bodies\n"
    "                               of the models on CUDA devices, so that a first peak of\n"
    "                               load does not pin new memory while it is served (default\n"
    "                               0: none reserved; bodies are pinned as they come).\n"
    "  --http-restricted-api <apis>:<header>=<value>\n"
    "                               Answer 403 to the API groups listed (health, metadata,\n"
    "                               inference, shared-memory, model-config, model-repository,\n"
    "                               statistics, trace, logging) unless the request has the\n"
    "                               header with the value. Repeatable.\n"
    "  --http-header-forward-pattern <regex>\n"
    "                               Inference request headers whose name the pattern matches\n"
    "                               (any part, any case; POSIX extended) become string\n"
    "                               request parameters for the model.\n"
    "  --exit-timeout-secs <int>    On SIGTERM/SIGINT, wait this long for accepted requests\n"
    "                               (default 30).\n"
    "  --exit-drain-secs <int>      On SIGTERM/SIGINT, first fail readiness and go on serving\n"
    "                               inference this long, so a load balancer can take the\n"
    "                               server out; a second signal ends it (default 0;\n"
    "                               ptserve only).\n"
    "  --allow-grpc <bool>          Serve KServe v2 gRPC (default true).\n"
    "  --grpc-address <addr>        gRPC address to bind (default 0.0.0.0).\n"
    "  --grpc-port <int>            gRPC port (default 8001; 0 = any free port).\n"
    "  --reuse-grpc-port <bool>     Let several servers share the gRPC port (default false).\n"
    "  --grpc-infer-thread-count <int>\n"
    "                               nghttp2 event loops (default: one per core, 2 to 8),\n"
    "                               or gRPC core's completion-queue threads (default 1).\n"
    "  --grpc-infer-response-compression-level <none|low|medium|high>\n"
    "                               Compression of inference responses (default none).\n"
    "  --grpc-keepalive-time <ms>   Keepalive ping period (default 7200000).\n"
    "  --grpc-keepalive-timeout <ms>\n"
    "                               Wait for a keepalive ping's ack (default 20000).\n"
    "  --grpc-keepalive-permit-without-calls <bool>\n"
    "                               Keepalive pings without calls (default false).\n"
    "  --grpc-http2-max-pings-without-data <int>   (default 2; 0 = no limit)\n"
    "  --grpc-http2-min-recv-ping-interval-without-data <ms>   (default 300000)\n"
    "  --grpc-http2-max-ping-strikes <int>         (default 2; 0 = no limit)\n"
    "  --grpc-max-connection-age <ms>              (default: unlimited)\n"
    "  --grpc-max-connection-age-grace <ms>        (default: unlimited)\n"
    "  --grpc-max-connections <int> Open gRPC connections; one more is closed at once\n"
    "                               (default: a quarter of what the descriptor limit leaves\n"
    "                               beside HTTP; ptserve only).\n"
    "  --grpc-restricted-protocol <apis>:<key>=<value>\n"
    "                               Fail the rpcs of the API groups listed (same groups as\n"
    "                               --http-restricted-api) with UNAVAILABLE unless the call\n"
    "                               has the metadata key with the value. Repeatable.\n"
    "  --grpc-header-forward-pattern <regex>\n"
    "                               The same for the metadata of ModelInfer and\n"
    "                               ModelStreamInfer calls.\n"
    "  --grpc-use-ssl <bool>        Serve gRPC over TLS (1.2 or 1.3, ALPN h2) with\n"
    "                               --grpc-server-cert and --grpc-server-key (default false).\n"
    "  --grpc-use-ssl-mutual <bool> Serve gRPC over TLS whatever the value, as tritonserver\n"
    "                               does, and when true require a client certificate signed\n"
    "                               by --grpc-root-cert (default false). Not with\n"
    "                               --grpc-use-ssl false.\n"
    "  --grpc-server-cert <file>    PEM: the gRPC server's certificate, then its chain.\n"
    "  --grpc-server-key <file>     PEM: its private key (without a pass phrase).\n"
    "  --grpc-root-cert <file>      PEM: the roots that sign the clients' certificates.\n"
    "  --allow-metrics <bool>       Serve Prometheus metrics on GET /metrics (default true).\n"
    "  --metrics-address <addr>     Address of the metrics listener (default: --http-address).\n"
    "  --metrics-port <int>         Metrics port (default 8002; 0 = any free port).\n"
    "  --metrics-interval-ms <int>  CPU and GPU sampling interval (default 2000).\n"
    "  --allow-cpu-metrics <bool>   CPU and memory gauges (default true).\n"
    "  --metrics-config <setting>=<value>\n"
    "                               Kinds of the latency metrics (repeatable):\n"
    "                               counter_latencies=<bool> (default true),\n"
    "                               summary_latencies=<bool> (default false),\n"
    "                               summary_quantiles=<q>:<err>,... (default\n"
    "                               0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001,0.999:0.001),\n"
    "                               histogram_latencies=<bool> (decoupled models only).\n"
    "  --allow-gpu-metrics <bool>   GPU gauges through NVML (default true; none without\n"
    "                               an NVIDIA driver).\n"
    "  --rate-limit <mode>           execution_count: each model instance executes when the\n"
    "                               rate limiter allots its group's rate_limiter resources,\n"
    "                               least executions x priority first; off (default).\n"
    "  --rate-limit-resource <name>:<count>[:<device>]\n"
    "                               How many of a resource there are (repeatable; default:\n"
    "                               the most one instance needs).\n"
    "  --host-policy <name>,<setting>=<value>\n"
    "                               Bind the instances of policy <name> (an instance\n"
    "                               group's host_policy, else cpu, gpu_<id>, model):\n"
    "                               cpu-cores=<lo>-<hi>[,...] or numa-node=<n>.\n"
    "  --model-load-retry-count <n> Load a model again, at once, up to n times after a\n"
    "                               failed load (default 0).\n"
    "  --disable-auto-complete-config\n"
    "                               Every model needs its config file, and inputs and\n"
    "                               outputs are not filled in from an AOTInductor\n"
    "                               package (--strict-model-config=true: the same,\n"
    "                               deprecated).\n"
    "  --allow-sagemaker <bool>     Also serve SageMaker's /ping and /invocations (default\n"
    "                               false; the model and kind from SAGEMAKER_TRITON_*).\n"
    "  --sagemaker-port <int>       Its port (default 8080), on every address.\n"
    "  --sagemaker-safe-port-range <lo>-<hi>\n"
    "                               The ports the other services may use.\n"
    "  --sagemaker-thread-count <int>\n"
    "                               Its event loops (default 8).\n"
    "  --allow-vertex-ai <bool>     Also serve Vertex AI's $AIP_HEALTH_ROUTE and\n"
    "                               $AIP_PREDICT_ROUTE (default false; true, with HTTP\n"
    "                               and gRPC off, when AIP_MODE=PREDICTION).\n"
    "  --vertex-ai-port <int>       Its port (default $AIP_HTTP_PORT, else 8080).\n"
    "  --vertex-ai-thread-count <int>\n"
    "                               Its event loops (default 8).\n"
    "  --vertex-ai-default-model <name>\n"
    "                               The model it runs (default: the repository's one).\n"
    "  --allow-client-shm <bool>    Let clients register and use system and CUDA shared\n"
    "                               memory regions (default false, as tritonserver).\n"
    "  --log-verbose <int>          Verbose logging level, 0 = off (default 0).\n"
    "  --log-info <bool>            Info lines (default true).\n"
    "  --log-warning <bool>         Warning lines (default true).\n"
    "  --log-error <bool>           Error lines (default true).\n"
    "  --log-format <fmt>           'default' or 'ISO8601' (default 'default').\n"
    "  --log-file <path>            Append the log to this file (default stderr).\n"
    "  --trace-config [triton,]<setting>=<value>\n"
    "                               Request tracing (repeatable): level=OFF|TIMESTAMPS|\n"
    "                               TENSORS (repeat to combine), rate=<N> (every N-th\n"
    "                               request, default 1000), count=<N> (-1 = no limit),\n"
    "                               file=<path>, log-frequency=<N> (0 = write at exit).\n"
    "                               --trace-file/-level/-rate/-count/-log-frequency are\n"
    "                               the deprecated spellings.\n"
    "  --cache-config local,size=<bytes>\n"
    "                               The response cache, for models whose config has\n"
    "                               response_cache { enable: true } (default: none).\n"
    "                               --response-cache-byte-size <bytes> is the deprecated\n"
    "                               spelling.\n"
    "  --profile-dir <dir>          Where operator profiles are written (default: the\n"
    "                               trace file's directory, else the working directory;\n"
    "                               ptserve only).\n"
    "  --help                       This text.\n"
    "  --version                    Print the version and exit.\n"
    "\n"
    "  --model-config-name <name>   Read <model>/configs/<name>.pbtxt instead of\n"
    "                               config.pbtxt where it exists.\n"
    "  --id <name>                  The server's name in its metadata (default 'ptserve';\n"
    "                               tritonserver's is 'triton').\n"
    "\n"
    "tritonserver's flags for parts ptserve does not have (--backend-directory,\n"
    "memory pools, ...) are accepted without effect and named in the log; the others\n"
    "it does not support are refused with the reason (docs/configuration.md).\n";

struct cli {
  struct pts_server_options opts;
  const char **repos; /* argv strings, borrowed */
  size_t n_repos;
  struct pts_log_settings log;
  const char *log_file;
  /* --http-restricted-api values (argv strings, borrowed); each names at
   * least one of the PTS_API_COUNT groups and no group twice. */
  const char *restricted[PTS_API_COUNT];
  size_t n_restricted;
  const char *grpc_restricted[PTS_API_COUNT]; /* --grpc-restricted-protocol, likewise */
  size_t n_grpc_restricted;
  char **trace; /* owned copies of the --trace-config values */
  size_t n_trace;
  /* --cache-config values (argv strings, borrowed); the last that names a
   * size wins, as in tritonserver. */
  const char *cache[16];
  size_t n_cache;
  const char **load_models; /* --load-model values (argv strings, borrowed) */
  size_t n_load_models;
  size_t pinned_pool; /* --pinned-memory-pool-byte-size (0: none; core/pinned.h) */
  const char *no_effect[16]; /* accepted tritonserver flags without effect (static names) */
  size_t n_no_effect;
  /* --disable-auto-complete-config, and the deprecated --strict-model-config
   * it overrides (tritonserver's rule, check_autofill) */
  bool no_autofill;
  bool strict_given, strict;
  /* --grpc-use-ssl and --grpc-use-ssl-mutual as given (check_grpc_tls settles them) */
  bool use_ssl_given, use_ssl, mutual_given, mutual;
  /* TLS flags that this command line leaves without effect, and why (static
   * strings): a warning each once the log is set up */
  struct {
    const char *flag, *why;
  } tls_unused[3];
  size_t n_tls_unused;
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ptserve: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\n", stderr);
  va_end(ap);
  return -1;
}

static int parse_bool(const char *flag, const char *v, bool *out) {
  static const char *const yes[] = {"true", "1", "on"}, *const no[] = {"false", "0", "off"};
  for (size_t i = 0; i < 3; i++) {
    if (strcasecmp(v, yes[i]) == 0) return *out = true, 0;
    if (strcasecmp(v, no[i]) == 0) return *out = false, 0;
  }
  return fail("invalid value '%s' for --%s: expected true/false, 1/0 or on/off", v, flag);
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (!*v || *end || errno == ERANGE || n < lo || n > hi)
    return fail("invalid value '%s' for --%s: expected an integer in %ld..%ld", v, flag, lo, hi);
  *out = n;
  return 0;
}

static int add_repository(struct cli *c, const char *path) {
  if (!*path) return fail("--model-repository needs a directory, got an empty value");
  const char **grown = pts_realloc(c->repos, (c->n_repos + 1) * sizeof *grown);
  if (!grown) return fail("out of memory parsing the command line");
  c->repos = grown;
  c->repos[c->n_repos++] = path;
  return 0;
}

static int add_load_model(struct cli *c, const char *name) {
  if (!*name) return fail("--load-model needs a model name, got an empty value");
  const char **grown = pts_realloc(c->load_models, (c->n_load_models + 1) * sizeof *grown);
  if (!grown) return fail("out of memory parsing the command line");
  c->load_models = grown;
  c->load_models[c->n_load_models++] = name;
  return 0;
}

/* tritonserver's rules for --load-model, with its words. */
static int check_load_models(struct cli *c) {
  if (c->n_load_models && c->opts.model_control_mode != PTS_MODEL_CONTROL_EXPLICIT)
    return fail("Use of '--load-model' requires setting '--model-control-mode=explicit' as well.");
  for (size_t i = 0; i < c->n_load_models; i++)
    if (strcmp(c->load_models[i], "*") == 0 && c->n_load_models > 1)
      return fail("Wildcard model name '*' must be the ONLY --load-model argument.");
  c->opts.load_models = c->load_models;
  c->opts.n_load_models = c->n_load_models;
  return 0;
}

static int parse_control_mode(const char *v, enum pts_model_control_mode *out) {
  static const struct {
    const char *name;
    enum pts_model_control_mode mode;
  } modes[] = {{"none", PTS_MODEL_CONTROL_NONE},
               {"poll", PTS_MODEL_CONTROL_POLL},
               {"explicit", PTS_MODEL_CONTROL_EXPLICIT}};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (strcasecmp(v, modes[i].name) == 0) return *out = modes[i].mode, 0;
  return fail("invalid value '%s' for --model-control-mode: expected none, poll or explicit", v);
}

static int add_restricted(struct cli *c, const char *spec) {
  if (c->n_restricted == PTS_API_COUNT)
    return fail("--http-restricted-api given more than %d times: some API is named twice",
                PTS_API_COUNT);
  c->restricted[c->n_restricted++] = spec;
  return 0;
}

static int add_grpc_restricted(struct cli *c, const char *spec) {
  if (c->n_grpc_restricted == PTS_API_COUNT)
    return fail("--grpc-restricted-protocol given more than %d times: some API is named twice",
                PTS_API_COUNT);
  c->grpc_restricted[c->n_grpc_restricted++] = spec;
  return 0;
}

/* --trace-config (and its deprecated spellings, rewritten as "<key>=v"). */
static int add_trace(struct cli *c, const char *key, const char *v) {
  size_t len = (key ? strlen(key) + 1 : 0) + strlen(v) + 1;
  char *spec = pts_malloc(len);
  char **grown = spec ? pts_realloc(c->trace, (c->n_trace + 1) * sizeof *grown) : NULL;
  if (!grown) {
    pts_free(spec);
    return fail("out of memory parsing the command line");
  }
  c->trace = grown;
  snprintf(spec, len, "%s%s%s", key ? key : "", key ? "=" : "", v);
  c->trace[c->n_trace++] = spec;
  return 0;
}

static void free_trace(struct cli *c) {
  for (size_t i = 0; i < c->n_trace; i++) pts_free(c->trace[i]);
  pts_free(c->trace);
}

/* The tracer parses these again when the server starts; checking them here
 * makes a bad value fail before any model is loaded. */
static int check_trace(struct cli *c) {
  struct pts_error err;
  if (pts_trace_check_config((const char *const *)c->trace, c->n_trace, &err) != PTS_OK)
    return fail("%s", err.msg);
  c->opts.trace_config = (const char *const *)c->trace;
  c->opts.n_trace_config = c->n_trace;
  return 0;
}

/* --cache-config: a bad value fails before any model is loaded. */
static int check_cache(struct cli *c) {
  if (c->n_cache == 0) return 0;
  struct pts_error err;
  size_t bytes;
  if (pts_cache_parse_config(c->cache, c->n_cache, &bytes, &err) != PTS_OK)
    return fail("%s", err.msg);
  c->opts.response_cache_bytes = bytes;
  return 0;
}

/* The frontend parses these again when it starts; checking them here makes
 * a bad value fail before any model is loaded. */
static int check_restricted(struct cli *c) {
  struct pts_restrictions r;
  struct pts_error err;
  enum pts_status st = pts_http_restrictions_parse(c->restricted, c->n_restricted, &r, &err);
  pts_restrictions_clear(&r);
  if (st != PTS_OK) return fail("%s", err.msg);
  c->opts.http_restricted_api = c->restricted;
  c->opts.n_http_restricted_api = c->n_restricted;
  st = pts_restrictions_parse("--grpc-restricted-protocol", c->grpc_restricted,
                              c->n_grpc_restricted, &r, &err);
  pts_restrictions_clear(&r);
  if (st != PTS_OK) return fail("%s", err.msg);
  c->opts.grpc_restricted_protocol = c->grpc_restricted;
  c->opts.n_grpc_restricted_protocol = c->n_grpc_restricted;
  return 0;
}

static void tls_unused(struct cli *c, const char *flag, const char *why) {
  c->tls_unused[c->n_tls_unused].flag = flag;
  c->tls_unused[c->n_tls_unused++].why = why;
}

/* tritonserver's TLS flags, as its parser and gRPC core read them:
 * --grpc-use-ssl-mutual turns TLS on whatever its value (and requires
 * client certificates when true); --grpc-server-cert, -key and
 * --grpc-root-cert are ignored without TLS, and --grpc-root-cert without
 * client certificates (each a warning here). Its help says
 * --grpc-use-ssl-mutual preempts --grpc-use-ssl, but its parser lets the
 * later of the two win, so --grpc-use-ssl false beside it means TLS or
 * not by their order: refused. What tritonserver hands on to gRPC core
 * unchecked (a file missing or unreadable reads as empty there; a
 * certificate and key that do not match) fails start-up here, before any
 * model loads; the frontend reads the files again when it starts. */
static int check_grpc_tls(struct cli *c) {
  struct pts_server_options *o = &c->opts;
  if (c->mutual_given && c->use_ssl_given && !c->use_ssl)
    return fail("--grpc-use-ssl false contradicts --grpc-use-ssl-mutual, which turns TLS on "
                "whatever its value (tritonserver lets the later of the two win); give "
                "--grpc-use-ssl-mutual alone for TLS, or neither for plaintext gRPC");
  o->grpc_use_ssl = c->mutual_given || c->use_ssl;
  o->grpc_use_ssl_mutual = c->mutual_given && c->mutual;
  if (!o->allow_grpc) return 0;
  if (!o->grpc_use_ssl) {
    static const char off[] = "gRPC is served without TLS unless --grpc-use-ssl or "
                              "--grpc-use-ssl-mutual is given (tritonserver ignores it too)";
    if (o->grpc_server_cert) tls_unused(c, "grpc-server-cert", off);
    if (o->grpc_server_key) tls_unused(c, "grpc-server-key", off);
    if (o->grpc_root_cert) tls_unused(c, "grpc-root-cert", off);
    return 0;
  }
  if (o->grpc_root_cert && !o->grpc_use_ssl_mutual)
    tls_unused(c, "grpc-root-cert", "client certificates are asked for only with "
                                    "--grpc-use-ssl-mutual true (tritonserver ignores it too)");
  struct pts_tls_ctx *ctx;
  struct pts_error err;
  if (pts_grpc_tls_new(o, &ctx, &err) != PTS_OK) return fail("%s", err.msg);
  pts_tls_ctx_free(ctx);
  return 0;
}

/* The gRPC frontend's flags (tritonserver's names, ranges and defaults). */
static int handle_grpc(struct pts_server_options *o, int opt, const char *flag, const char *v) {
  static const char *const levels[] = {"none", "low", "medium", "high"};
  long n = 0;
  switch (opt) {
    case OPT_GRPC_PORT:
      if (parse_long(flag, v, 0, 65535, &n) != 0) return -1;
      o->grpc_port = (int)n;
      return 0;
    case OPT_GRPC_ADDRESS:
      if (!*v) return fail("--grpc-address needs an address, got an empty value");
      o->grpc_address = v;
      return 0;
    case OPT_REUSE_GRPC_PORT:
      return parse_bool(flag, v, &o->reuse_grpc_port);
    case OPT_GRPC_INFER_THREAD_COUNT:
      if (parse_long(flag, v, 1, 1024, &n) != 0) return -1;
      o->grpc_infer_thread_count = (int)n;
      return 0;
    case OPT_GRPC_COMPRESSION_LEVEL:
      for (int i = 0; i < 4; i++)
        if (strcasecmp(v, levels[i]) == 0) return o->grpc_compression_level = i, 0;
      return fail("invalid value '%s' for --%s: expected none, low, medium or high", v, flag);
    case OPT_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS:
      return parse_bool(flag, v, &o->grpc_keepalive_permit_without_calls);
    case OPT_GRPC_SERVER_CERT:
    case OPT_GRPC_SERVER_KEY:
    case OPT_GRPC_ROOT_CERT:
      if (!*v) return fail("--%s needs a file, got an empty value", flag);
      *(opt == OPT_GRPC_SERVER_CERT  ? &o->grpc_server_cert
        : opt == OPT_GRPC_SERVER_KEY ? &o->grpc_server_key
                                     : &o->grpc_root_cert) = v;
      return 0;
  }
  if (parse_long(flag, v, 0, INT_MAX, &n) != 0) return -1;
  int *fields[] = {&o->grpc_keepalive_time_ms,       &o->grpc_keepalive_timeout_ms,
                   &o->grpc_http2_max_pings_without_data, &o->grpc_http2_min_recv_ping_interval_ms,
                   &o->grpc_http2_max_ping_strikes,  &o->grpc_max_connection_age_ms,
                   &o->grpc_max_connection_age_grace_ms};
  int opts[] = {OPT_GRPC_KEEPALIVE_TIME,         OPT_GRPC_KEEPALIVE_TIMEOUT,
                OPT_GRPC_MAX_PINGS_WITHOUT_DATA, OPT_GRPC_MIN_RECV_PING_INTERVAL,
                OPT_GRPC_MAX_PING_STRIKES,       OPT_GRPC_MAX_CONNECTION_AGE,
                OPT_GRPC_MAX_CONNECTION_AGE_GRACE};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (opts[i] == opt) return *fields[i] = (int)n, 0;
  return fail("internal error: unhandled flag --%s", flag);
}

static int handle(struct cli *c, int opt, const char *flag, const char *v) {
  struct pts_server_options *o = &c->opts;
  long n = 0;
  switch (opt) {
    case OPT_MODEL_REPOSITORY:
      return add_repository(c, v);
    case OPT_LOG_VERBOSE:
      if (parse_long(flag, v, 0, INT_MAX, &n) != 0) return -1;
      c->log.verbose_level = (int)n;
      return 0;
    case OPT_LOG_INFO:
      return parse_bool(flag, v, &c->log.info);
    case OPT_LOG_WARNING:
      return parse_bool(flag, v, &c->log.warning);
    case OPT_LOG_ERROR:
      return parse_bool(flag, v, &c->log.error);
    case OPT_LOG_FORMAT:
      if (strcmp(v, "default") == 0)
        c->log.format = PTS_LOG_FORMAT_DEFAULT;
      else if (strcmp(v, "ISO8601") == 0)
        c->log.format = PTS_LOG_FORMAT_ISO8601;
      else
        return fail("invalid value '%s' for --log-format: expected 'default' or 'ISO8601'", v);
      return 0;
    case OPT_LOG_FILE:
      c->log_file = v;
      return 0;
    case OPT_STRICT_READINESS:
      return parse_bool(flag, v, &o->strict_readiness);
    case OPT_EXIT_ON_ERROR:
      return parse_bool(flag, v, &o->exit_on_error);
    case OPT_ALLOW_HTTP:
      return parse_bool(flag, v, &o->allow_http);
    case OPT_HTTP_PORT:
      if (parse_long(flag, v, 0, 65535, &n) != 0) return -1;
      o->http_port = (int)n;
      return 0;
    case OPT_REUSE_HTTP_PORT:
      return parse_bool(flag, v, &o->reuse_http_port);
    case OPT_HTTP_ADDRESS:
      if (!*v) return fail("--http-address needs an address, got an empty value");
      o->http_address = v;
      return 0;
    case OPT_HTTP_THREAD_COUNT:
      if (parse_long(flag, v, 1, 1024, &n) != 0) return -1;
      o->http_thread_count = (int)n;
      return 0;
    case OPT_HTTP_MAX_INPUT_SIZE:
      if (parse_long(flag, v, 1, LONG_MAX, &n) != 0) return -1;
      o->http_max_input_size = (size_t)n;
      return 0;
    case OPT_HTTP_MAX_HEADER_SIZE:
      if (parse_long(flag, v, 256, INT_MAX, &n) != 0) return -1;
      o->http_max_header_size = (size_t)n;
      return 0;
    case OPT_HTTP_TIMEOUT_SECS:
      if (parse_long(flag, v, 0, 86400, &n) != 0) return -1;
      o->http_timeout_secs = (unsigned)n;
      return 0;
    case OPT_HTTP_MAX_CONNECTIONS:
      if (parse_long(flag, v, 1, 1L << 30, &n) != 0) return -1;
      o->http_max_connections = (unsigned long)n;
      return 0;
    case OPT_DEFAULT_MAX_QUEUE_SIZE:
      if (parse_long(flag, v, 0, LONG_MAX, &n) != 0) return -1;
      o->default_max_queue_size = (uint64_t)n;
      return 0;
    case OPT_REQUEST_MEMORY_BUDGET:
      if (parse_long(flag, v, 1, LONG_MAX, &n) != 0) return -1;
      o->request_memory_budget = (size_t)n;
      return 0;
    case OPT_PINNED_MEMORY_POOL:
      if (parse_long(flag, v, 0, LONG_MAX, &n) != 0) return -1;
      c->pinned_pool = (size_t)n;
      return 0;
    case OPT_GRPC_MAX_CONNECTIONS:
      if (parse_long(flag, v, 1, INT_MAX, &n) != 0) return -1;
      o->grpc_max_connections = (int)n;
      return 0;
    case OPT_HTTP_RESTRICTED_API:
      return add_restricted(c, v);
    case OPT_GRPC_RESTRICTED_PROTOCOL:
      return add_grpc_restricted(c, v);
    case OPT_EXIT_TIMEOUT_SECS:
      if (parse_long(flag, v, 0, 86400, &n) != 0) return -1;
      o->exit_timeout_secs = (unsigned)n;
      return 0;
    case OPT_EXIT_DRAIN_SECS:
      if (parse_long(flag, v, 0, 3600, &n) != 0) return -1;
      o->exit_drain_secs = (unsigned)n;
      return 0;
    case OPT_MODEL_CONTROL_MODE:
      return parse_control_mode(v, &o->model_control_mode);
    case OPT_LOAD_MODEL:
      return add_load_model(c, v);
    case OPT_REPOSITORY_POLL_SECS:
      if (parse_long(flag, v, 0, INT_MAX, &n) != 0) return -1;
      o->repository_poll_secs = (unsigned)n;
      return 0;
    case OPT_MODEL_LOAD_THREAD_COUNT:
      if (parse_long(flag, v, 1, 1024, &n) != 0) return -1;
      o->model_load_thread_count = (int)n;
      return 0;
    case OPT_ALLOW_GRPC:
      return parse_bool(flag, v, &o->allow_grpc);
    case OPT_GRPC_PORT:
    case OPT_GRPC_ADDRESS:
    case OPT_REUSE_GRPC_PORT:
    case OPT_GRPC_INFER_THREAD_COUNT:
    case OPT_GRPC_COMPRESSION_LEVEL:
    case OPT_GRPC_KEEPALIVE_TIME:
    case OPT_GRPC_KEEPALIVE_TIMEOUT:
    case OPT_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS:
    case OPT_GRPC_MAX_PINGS_WITHOUT_DATA:
    case OPT_GRPC_MIN_RECV_PING_INTERVAL:
    case OPT_GRPC_MAX_PING_STRIKES:
    case OPT_GRPC_MAX_CONNECTION_AGE:
    case OPT_GRPC_MAX_CONNECTION_AGE_GRACE:
    case OPT_GRPC_SERVER_CERT:
    case OPT_GRPC_SERVER_KEY:
    case OPT_GRPC_ROOT_CERT:
      return handle_grpc(o, opt, flag, v);
    case OPT_GRPC_USE_SSL:
      c->use_ssl_given = true;
      return parse_bool(flag, v, &c->use_ssl);
    case OPT_GRPC_USE_SSL_MUTUAL:
      c->mutual_given = true;
      return parse_bool(flag, v, &c->mutual);
    case OPT_ALLOW_METRICS:
      return parse_bool(flag, v, &o->allow_metrics);
    case OPT_ALLOW_CPU_METRICS:
      return parse_bool(flag, v, &o->allow_cpu_metrics);
    case OPT_ALLOW_GPU_METRICS:
      return parse_bool(flag, v, &o->allow_gpu_metrics);
    case OPT_METRICS_ADDRESS:
      if (!*v) return fail("--metrics-address needs an address, got an empty value");
      o->metrics_address = v;
      return 0;
    case OPT_METRICS_PORT:
      if (parse_long(flag, v, 0, 65535, &n) != 0) return -1;
      o->metrics_port = (int)n;
      return 0;
    case OPT_METRICS_INTERVAL_MS:
      if (parse_long(flag, v, 1, 3600000, &n) != 0) return -1;
      o->metrics_interval_ms = (int)n;
      return 0;
    case OPT_HTTP_HEADER_FORWARD_PATTERN:
    case OPT_GRPC_HEADER_FORWARD_PATTERN: {
      struct pts_error err;
      enum pts_forward_proto proto =
          opt == OPT_HTTP_HEADER_FORWARD_PATTERN ? PTS_FORWARD_HTTP : PTS_FORWARD_GRPC;
      if (pts_header_forward_set(proto, v, &err) != PTS_OK) return fail("%s", err.msg);
      return 0;
    }
    case OPT_RATE_LIMIT:
    case OPT_RATE_LIMIT_RESOURCE: {
      struct pts_error err;
      enum pts_status st = opt == OPT_RATE_LIMIT ? pts_rate_limit_set_mode(v, &err)
                                                 : pts_rate_limit_add_resource(v, &err);
      if (st != PTS_OK) return fail("%s", err.msg);
      return 0;
    }
    case OPT_METRICS_CONFIG: {
      struct pts_error err;
      if (pts_metrics_config_add(v, &err) != PTS_OK) return fail("%s", err.msg);
      return 0;
    }
    case OPT_CACHE_CONFIG:
      if (c->n_cache == sizeof c->cache / sizeof c->cache[0])
        return fail("--cache-config given more than %zu times", c->n_cache);
      c->cache[c->n_cache++] = v;
      return 0;
    case OPT_RESPONSE_CACHE_BYTE_SIZE:
      if (parse_long(flag, v, 0, LONG_MAX, &n) != 0) return -1;
      o->response_cache_bytes = (size_t)n;
      return 0;
    case OPT_TRACE_CONFIG:
      return add_trace(c, NULL, v);
    case OPT_TRACE_FILE:
      return add_trace(c, "file", v);
    case OPT_TRACE_LEVEL:
      return add_trace(c, "level", v);
    case OPT_TRACE_RATE:
      return add_trace(c, "rate", v);
    case OPT_TRACE_COUNT:
      return add_trace(c, "count", v);
    case OPT_TRACE_LOG_FREQUENCY:
      return add_trace(c, "log-frequency", v);
    case OPT_PROFILE_DIR:
      if (!*v) return fail("--profile-dir needs a directory, got an empty value");
      o->profile_dir = v;
      return 0;
    case OPT_MODEL_CONFIG_NAME:
      if (!v[0] || strchr(v, '/'))
        return fail("--model-config-name needs a file name without '/' (got '%s')", v);
      pts_model_config_set_custom_name(v);
      return 0;
    case OPT_ID:
      if (!v[0]) return fail("--id needs a non-empty name");
      o->server_id = v;
      return 0;
    case OPT_ALLOW_CLIENT_SHM:
      return parse_bool(flag, v, &o->allow_client_shm);
    case OPT_HOST_POLICY: {
      struct pts_error err;
      if (pts_host_policy_add(v, &err) != PTS_OK) return fail("--%s: %s", flag, err.msg);
      return 0;
    }
    case OPT_ALLOW_VERTEX_AI:
      return parse_bool(flag, v, &o->allow_vertex_ai);
    case OPT_VERTEX_AI_PORT:
      if (parse_long(flag, v, 0, 65535, &n) != 0) return -1;
      o->vertex_ai_port = (int)n;
      return 0;
    case OPT_VERTEX_AI_THREAD_COUNT:
      if (parse_long(flag, v, 1, 1024, &n) != 0) return -1;
      o->vertex_ai_thread_count = (int)n;
      return 0;
    case OPT_VERTEX_AI_DEFAULT_MODEL:
      if (!*v) return fail("--vertex-ai-default-model needs a model name, got an empty value");
      o->vertex_ai_default_model = v;
      return 0;
    case OPT_MODEL_LOAD_RETRY_COUNT:
      if (parse_long(flag, v, 0, 1000, &n) != 0) return -1;
      o->model_load_retry_count = (unsigned)n;
      return 0;
    case OPT_DISABLE_AUTO_COMPLETE_CONFIG:
      c->no_autofill = true;
      return 0;
    case OPT_STRICT_MODEL_CONFIG:
      /* tritonserver's warning, word for word */
      fputs("Warning: '--strict-model-config' has been deprecated! Please use "
            "'--disable-auto-complete-config' instead.\n",
            stderr);
      c->strict_given = true;
      return parse_bool(flag, v, &c->strict);
    case OPT_ALLOW_SAGEMAKER:
      return parse_bool(flag, v, &o->allow_sagemaker);
    case OPT_SAGEMAKER_PORT:
      if (parse_long(flag, v, 0, 65535, &n) != 0) return -1;
      o->sagemaker_port = (int)n;
      return 0;
    case OPT_SAGEMAKER_THREAD_COUNT:
      if (parse_long(flag, v, 1, 1024, &n) != 0) return -1;
      o->sagemaker_thread_count = (int)n;
      return 0;
    case OPT_SAGEMAKER_SAFE_PORT_RANGE: {
      /* tritonserver's "<lo>-<hi>" */
      const char *dash = strchr(v, '-');
      char lo[8];
      long hi;
      if (!dash || dash == v || (size_t)(dash - v) >= sizeof lo)
        return fail("invalid value '%s' for --%s: expected <first port>-<last port>", v, flag);
      memcpy(lo, v, (size_t)(dash - v));
      lo[dash - v] = 0;
      if (parse_long(flag, lo, 0, 65535, &n) != 0 || parse_long(flag, dash + 1, 0, 65535, &hi) != 0)
        return -1;
      if (n > hi) return fail("invalid value '%s' for --%s: the range is empty", v, flag);
      o->sagemaker_safe_port_lo = (int)n;
      o->sagemaker_safe_port_hi = (int)hi;
      return 0;
    }
  }
  return fail("internal error: unhandled flag --%s", flag);
}

/* Whether configs are auto-completed: --disable-auto-complete-config wins
 * over --strict-model-config=false, with tritonserver's warning. */
static void check_autofill(struct cli *c) {
  if (c->no_autofill && c->strict_given && !c->strict)
    fputs("Warning: Overriding deprecated '--strict-model-config' from False to True in favor "
          "of '--disable-auto-complete-config'!\n",
          stderr);
  pts_model_config_set_autofill(!(c->no_autofill || (c->strict_given && c->strict)));
}

/* tritonserver's port check (CheckPortCollision): two services on the
 * same address and port are refused, and with --sagemaker-safe-port-range
 * so is any other service outside the range. The cloud listeners are on
 * every address (0.0.0.0). Port 0 (any free port) is never a collision. */
static int check_ports(const struct pts_server_options *o) {
  const struct {
    const char *what, *address;
    int port;
    bool on, ranged;
  } sv[] = {
      {"HTTP", o->http_address, o->http_port, o->allow_http, false},
      {"GRPC", o->grpc_address, o->grpc_port, o->allow_grpc, false},
      {"metrics", o->metrics_address ? o->metrics_address : o->http_address, o->metrics_port,
       o->allow_metrics, false},
      {"SageMaker", "0.0.0.0", o->sagemaker_port, o->allow_sagemaker,
       o->sagemaker_safe_port_lo >= 0},
      {"Vertex AI", "0.0.0.0", o->vertex_ai_port, o->allow_vertex_ai, false},
  };
  size_t n = sizeof sv / sizeof sv[0];
  for (size_t i = 0; i < n; i++) {
    if (!sv[i].on) continue;
    for (size_t j = sv[i].ranged ? 0 : i + 1; j < n; j++) {
      if (j == i || !sv[j].on || strcmp(sv[i].address, sv[j].address) != 0) continue;
      int p = sv[j].port;
      if (sv[i].ranged && (p < o->sagemaker_safe_port_lo || p > o->sagemaker_safe_port_hi))
        return fail("The server cannot listen to %s requests at port %d, allowed port range is "
                    "[%d, %d] (--sagemaker-safe-port-range)",
                    sv[j].what, p, o->sagemaker_safe_port_lo, o->sagemaker_safe_port_hi);
      if (p != 0 && p == sv[i].port)
        return fail("The server cannot listen to %s requests and %s requests at the same "
                    "address and port %s:%d",
                    sv[i].what, sv[j].what, sv[i].address, p);
    }
  }
  return 0;
}

/* Google Vertex AI's environment, before the flags (which override it), as
 * tritonserver reads it: AIP_MODE=PREDICTION serves Vertex AI alone
 * (HTTP and gRPC off unless a flag turns them on), on $AIP_HTTP_PORT. */
static int apply_vertex_env(struct pts_server_options *o) {
  const char *mode = getenv("AIP_MODE");
  if (mode && strcmp(mode, "PREDICTION") == 0) {
    o->allow_vertex_ai = true;
    o->allow_http = false;
    o->allow_grpc = false;
  }
  const char *port = getenv("AIP_HTTP_PORT");
  if (!port) return 0;
  char *end;
  errno = 0;
  long n = strtol(port, &end, 10);
  if (!*port || *end || errno || n < 0 || n > 65535)
    return fail("invalid AIP_HTTP_PORT '%s' in the environment: expected a port in 0..65535",
                port);
  o->vertex_ai_port = (int)n;
  return 0;
}

/* tritonserver's flags that ptserve refuses, and why, with what to use
 * instead (docs/configuration.md lists every flag's status). */
static const struct {
  const char *flag, *why;
} REFUSED[] = {
    {"model-namespacing", "model names are one namespace across repositories; give models "
                          "unique names"},
    {"backend-config", "set a model's backend options as parameters in its config.pbtxt "
                       "(docs/pytorch-backend.md)"},
    {"min-supported-compute-capability", "every GPU the LibTorch build supports is used; "
                                         "hide others with CUDA_VISIBLE_DEVICES"},
    {"model-load-gpu-limit", "loads are not limited by GPU memory; cap a model's allocator "
                             "with its MEMORY_FRACTION parameter"},
};

/* tritonserver's flags that tune parts ptserve does not have: accepted, so
 * that a tritonserver command line starts, and named in the log once. */
static const struct {
  const char *flag, *why;
} NO_EFFECT[] = {
    {"backend-directory", "ptserve's backends (pytorch, ensemble) are built in"},
    {"repoagent-directory", "ptserve has no repository agents"},
    {"cache-directory", "the response cache is built in (--cache-config local,...)"},
    {"enable-peer-access", "ptserve makes no copies between GPUs"},
    {"grpc-infer-allocation-pool-size", "the gRPC transport keeps no per-call pool"},
    {"grpc-max-response-pool-size", "the gRPC transport keeps no response pool"},
    {"cuda-memory-pool-byte-size", "device memory comes from LibTorch's CUDA caching "
                                   "allocator (cap it per model with MEMORY_FRACTION)"},
    {"cuda-virtual-address-size", "device memory comes from LibTorch's CUDA caching "
                                  "allocator"},
    {"buffer-manager-thread-count", "buffers are copied on the thread that handles the "
                                    "request"},
};

static const char *reason_of(const char *flag, int no_effect) {
  if (no_effect) {
    for (size_t i = 0; i < sizeof NO_EFFECT / sizeof NO_EFFECT[0]; i++)
      if (strcmp(NO_EFFECT[i].flag, flag) == 0) return NO_EFFECT[i].why;
  } else {
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
      if (strcmp(REFUSED[i].flag, flag) == 0) return REFUSED[i].why;
  }
  return "";
}

/* Returns 0 to run, 1 for a usage error, 2 for --help/--version (exit 0). */
static int parse_args(int argc, char **argv, struct cli *c) {
  opterr = 0;
  if (apply_vertex_env(&c->opts) != 0) return 1;
  int opt, index;
  while ((index = -1, opt = getopt_long(argc, argv, ":", long_options, &index)) != -1) {
    const char *flag = index >= 0 ? long_options[index].name : NULL;
    if (opt == OPT_HELP) {
      fputs(usage_text, stdout);
      return 2;
    }
    if (opt == OPT_VERSION) {
      printf("ptserve %s\n", pts_server_version());
      return 2;
    }
    if (opt == '?') {
      fail("unrecognized option '%s' (see --help)", argv[optind - 1]);
      return 1;
    }
    if (opt == ':') {
      fail("option '%s' needs a value (see --help)", argv[optind - 1]);
      return 1;
    }
    if (opt == OPT_UNSUPPORTED) {
      /* --model-namespacing=false is tritonserver's default, and what
       * ptserve does: a deployment that spells it out still starts. */
      bool on = true;
      if (strcmp(flag, "model-namespacing") == 0 && optarg) {
        if (parse_bool(flag, optarg, &on) != 0) return 1;
        if (!on) continue;
      }
      fail("--%s is a tritonserver flag that ptserve does not support: %s", flag,
           reason_of(flag, 0));
      return 1;
    }
    if (opt == OPT_NO_EFFECT) {
      if (c->n_no_effect < sizeof c->no_effect / sizeof c->no_effect[0])
        c->no_effect[c->n_no_effect++] = flag;
      continue;
    }
    if (handle(c, opt, flag, optarg) != 0) return 1;
  }
  if (optind < argc) {
    fail("unexpected argument '%s' (flags start with --; see --help)", argv[optind]);
    return 1;
  }
  /* Vertex AI puts the model where AIP_STORAGE_URI says (tritonserver
   * reads it when no repository is given). */
  const char *aip_storage = getenv("AIP_STORAGE_URI");
  if (c->n_repos == 0 && aip_storage && *aip_storage && add_repository(c, aip_storage) != 0)
    return 1;
  if (c->n_repos == 0) {
    fail("--model-repository must be specified (see --help)");
    return 1;
  }
  c->opts.model_repositories = c->repos;
  c->opts.n_model_repositories = c->n_repos;
  check_autofill(c);
  return check_restricted(c) == 0 && check_trace(c) == 0 && check_cache(c) == 0 &&
                 check_load_models(c) == 0 && check_ports(&c->opts) == 0 &&
                 check_grpc_tls(c) == 0
             ? 0
             : 1;
}

/* ------------------------------------------------------------- signals */

static struct pts_server *_Atomic running_server;
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
  struct pts_server *s = atomic_load(&running_server);
  if (s) pts_server_stop(s);
}

static void install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN); /* a client that hangs up is not a reason to die */
}

/* The handler must not see the server while it is being freed. */
static void forget_server(void) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, &old);
  atomic_store(&running_server, NULL);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Descriptors are cheap and every connection takes one: the soft limit
 * (1024 on most systems) goes up to the hard one, as Go's runtime and
 * nginx's worker_rlimit_nofile do. ptserve uses no select(), so descriptors
 * above 1024 are fine. The connection limit's default follows from it. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  rlim_t soft = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
    PTS_LOG_VERBOSE(1, "descriptor limit raised from %llu to %llu", (unsigned long long)soft,
                    (unsigned long long)rl.rlim_max);
}

/* jemalloc's options for the server, read by jemalloc when it starts
 * (before main); MALLOC_CONF in the environment overrides any of them.
 * The C library's malloc ignores the symbol.
 *
 * dirty_decay_ms:-1 keeps freed pages for reuse instead of handing them
 * back to the kernel over the next 10 s. The default's decay works from the
 * net growth of the free pages, so under steady load, where every request
 * frees about what the next one takes, it purges the pool that the next
 * request needs. The pages then fault in again, zeroed by the kernel: on
 * 602 KB request bodies, 89-184 faults per request and 1.2-1.6x the
 * throughput lost (docs/experiments/jemalloc-decay). Memory still goes
 * back when a load ends: core/overload.c purges every arena once the
 * bytes held have fallen and jemalloc holds 64 MiB or more of free pages.
 * Intel's LibTorch CPU recipes set a decay of 9e9 ms for the same reason. */
extern const char *malloc_conf;
const char *malloc_conf = "dirty_decay_ms:-1";

/* Which malloc serves the process: a performance report names it, and a
 * build that did not find jemalloc should not pass unnoticed. With
 * jemalloc, its page decay too (malloc_conf above, or MALLOC_CONF). */
static void log_allocator(void) {
  pts_mallctl_fn mallctl_fn = pts_jemalloc_mallctl();
  const char *version = NULL;
  size_t len = sizeof version;
  if (mallctl_fn && mallctl_fn("version", (void *)&version, &len, NULL, 0) == 0 && version) {
    ssize_t decay = 0;
    size_t decay_len = sizeof decay;
    if (mallctl_fn("opt.dirty_decay_ms", &decay, &decay_len, NULL, 0) == 0)
      PTS_LOG_INFO("Memory allocator: jemalloc %s (dirty_decay_ms %zd)", version, decay);
    else
      PTS_LOG_INFO("Memory allocator: jemalloc %s", version);
    return;
  }
  PTS_LOG_INFO("Memory allocator: the C library's malloc");
}

static int serve(struct cli *c) {
  struct pts_error err;
  pts_error_clear(&err);
  struct pts_server *s = NULL;
  if (pts_server_create(&c->opts, &s, &err) != PTS_OK) {
    PTS_LOG_ERROR("%s", err.msg);
    return 1;
  }
  atomic_store(&running_server, s);
  if (stop_requested) pts_server_stop(s);
  enum pts_status st = pts_server_run(s, &err);
  if (st != PTS_OK) PTS_LOG_ERROR("%s", err.msg);
  /* --exit-timeout-secs expired with requests in flight: as tritonserver,
   * exit at once with status 1 (freeing would wait for the running model). */
  if (st == PTS_DEADLINE) _exit(1);
  forget_server();
  pts_server_destroy(s);
  return st == PTS_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  /* Before any thread: jansson's allocator is process-wide. */
  pts_json_arena_install();
  struct cli c;
  memset(&c, 0, sizeof c);
  pts_server_options_default(&c.opts);
  c.log = pts_log_get();
  int rc = parse_args(argc, argv, &c);
  if (rc != 0) {
    pts_free(c.repos);
    pts_free(c.load_models);
    free_trace(&c);
    return rc == 2 ? 0 : 1;
  }
  pts_log_set(&c.log);
  if (c.log_file && pts_log_set_file(c.log_file) != 0) {
    fail("failed to open --log-file '%s': %s", c.log_file, strerror(errno));
    pts_free(c.repos);
    pts_free(c.load_models);
    free_trace(&c);
    return 1;
  }
  /* Before any model loads: the first CUDA model reserves it. */
  pts_pinned_set_pool(c.pinned_pool);
  if (c.pinned_pool)
    PTS_LOG_INFO("Pinned memory pool: %zu bytes of request bodies, reserved when models load "
                 "on a CUDA device",
                 c.pinned_pool);
  for (size_t i = 0; i < c.n_no_effect; i++)
    PTS_LOG_INFO("--%s is accepted for tritonserver's command lines and has no effect: %s",
                 c.no_effect[i], reason_of(c.no_effect[i], 1));
  for (size_t i = 0; i < c.n_tls_unused; i++)
    PTS_LOG_WARN("--%s has no effect: %s", c.tls_unused[i].flag, c.tls_unused[i].why);
  install_signals();
  raise_fd_limit();
  log_allocator();
  rc = serve(&c);
  pts_free(c.repos);
  pts_free(c.load_models);
  free_trace(&c);
  pts_header_forward_reset();
  pts_rate_limit_reset();
  pts_log_set_file(NULL);
  return rc;
}
