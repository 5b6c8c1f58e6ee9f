/* bench/triton/backend.c — tritonserver's side of bench/triton: a Triton
 * backend that runs a model's model.pt through ptserve's own LibTorch bridge
 * (backends/pytorch/torch_bridge.h).
 *
 * Why it exists: the tritonserver that PyPI carries (inside the
 * nvidia-pytriton wheel) has only Triton's Python backend, and Triton's
 * PyTorch backend is built from GitHub, which the build machines do not
 * reach. bench/triton/run.sh installs this file's library as
 * backends/pytorch/libtriton_pytorch.so in a private backend directory, so
 * tritonserver serves the very config.pbtxt and model.pt that ptserve
 * serves (`backend: "pytorch"`), and the forward() both servers run is the
 * same code: what the benchmark compares is the server around it (Triton's
 * HTTP and gRPC frontends, its core and scheduler, and the backend API),
 * against ptserve's.
 *
 * It does less per request than Triton's PyTorch backend (no input
 * collector or output responder, no batching of several requests into one
 * tensor), so tritonserver measured with it is a lower bound on
 * tritonserver with its own backend, never an upper one. A KIND_GPU
 * instance loads the model on its CUDA device, where the bridge (built
 * with the same CUDA path as ptserve's: the instance's stream, the phase
 * events, the timed wait) copies inputs in and results back.
 *
 * The Triton declarations below are this file's own, of the C ABI that
 * tritonserver exports (tritonbackend.h and tritonserver.h in Triton's core
 * repository define it); only what is called here is declared. The API
 * version it was written against is checked at TRITONBACKEND_Initialize.
 *
 * Threading: Triton calls ModelInitialize/Finalize and
 * ModelInstanceInitialize/Finalize on its load threads, and
 * ModelInstanceExecute on the instance's own thread, one batch at a time;
 * an instance's state is touched only by that thread, a model's state is
 * read-only after ModelInitialize.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/pytorch/torch_bridge.h"

/* ---- The part of Triton's C ABI this backend uses ---- */

typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;

/* Enumerators by value (tritonserver.h). */
typedef int TRITONSERVER_DataType;
typedef int TRITONSERVER_MemoryType;
enum { TS_MEM_CPU = 0, TS_MEM_CPU_PINNED = 1 };
enum { TS_ERROR_INTERNAL = 1, TS_ERROR_INVALID_ARG = 3, TS_ERROR_UNSUPPORTED = 5 };
enum { TS_RESPONSE_COMPLETE_FINAL = 1 };
enum { TS_REQUEST_RELEASE_ALL = 1 };
enum { TS_ARTIFACT_FILESYSTEM = 0 };
enum { TS_INSTANCE_KIND_GPU = 2 };
/* The backend API version of the headers these declarations follow;
 * tritonserver 2.51.0 passes the check in TRITONBACKEND_Initialize. */
enum { API_MAJOR = 1, API_MINOR = 19 };

extern TRITONSERVER_Error *TRITONSERVER_ErrorNew(int code, const char *msg);
extern void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *error);
extern const char *TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype);
extern TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char *dtype);
extern TRITONSERVER_Error *TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message *message,
                                                               const char **base, size_t *byte_size);
extern TRITONSERVER_Error *TRITONSERVER_MessageDelete(TRITONSERVER_Message *message);

extern TRITONSERVER_Error *TRITONBACKEND_ApiVersion(uint32_t *major, uint32_t *minor);
extern TRITONSERVER_Error *TRITONBACKEND_ModelName(TRITONBACKEND_Model *model, const char **name);
extern TRITONSERVER_Error *TRITONBACKEND_ModelVersion(TRITONBACKEND_Model *model,
                                                      uint64_t *version);
extern TRITONSERVER_Error *TRITONBACKEND_ModelRepository(TRITONBACKEND_Model *model,
                                                         int *artifact_type,
                                                         const char **location);
extern TRITONSERVER_Error *TRITONBACKEND_ModelConfig(TRITONBACKEND_Model *model,
                                                     uint32_t config_version,
                                                     TRITONSERVER_Message **model_config);
extern TRITONSERVER_Error *TRITONBACKEND_ModelSetState(TRITONBACKEND_Model *model, void *state);
extern TRITONSERVER_Error *TRITONBACKEND_ModelState(TRITONBACKEND_Model *model, void **state);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance *instance,
                                                            TRITONBACKEND_Model **model);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance *instance,
                                                           int *kind);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceDeviceId(
    TRITONBACKEND_ModelInstance *instance, int32_t *device_id);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSetState(
    TRITONBACKEND_ModelInstance *instance, void *state);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance *instance,
                                                            void **state);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request, const bool success,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);
extern TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance *instance, const uint64_t batch_size,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);
extern TRITONSERVER_Error *TRITONBACKEND_RequestInput(TRITONBACKEND_Request *request,
                                                      const char *name,
                                                      TRITONBACKEND_Input **input);
extern TRITONSERVER_Error *TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request *request,
                                                            uint32_t *count);
extern TRITONSERVER_Error *TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request *request,
                                                           const uint32_t index,
                                                           const char **output_name);
extern TRITONSERVER_Error *TRITONBACKEND_RequestRelease(TRITONBACKEND_Request *request,
                                                        uint32_t release_flags);
extern TRITONSERVER_Error *TRITONBACKEND_InputProperties(
    TRITONBACKEND_Input *input, const char **name, TRITONSERVER_DataType *datatype,
    const int64_t **shape, uint32_t *dims_count, uint64_t *byte_size, uint32_t *buffer_count);
extern TRITONSERVER_Error *TRITONBACKEND_InputBuffer(TRITONBACKEND_Input *input,
                                                     const uint32_t index, const void **buffer,
                                                     uint64_t *buffer_byte_size,
                                                     TRITONSERVER_MemoryType *memory_type,
                                                     int64_t *memory_type_id);
extern TRITONSERVER_Error *TRITONBACKEND_ResponseNew(TRITONBACKEND_Response **response,
                                                     TRITONBACKEND_Request *request);
extern TRITONSERVER_Error *TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response *response,
                                                        TRITONBACKEND_Output **output,
                                                        const char *name,
                                                        const TRITONSERVER_DataType datatype,
                                                        const int64_t *shape,
                                                        const uint32_t dims_count);
extern TRITONSERVER_Error *TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output *output, void **buffer,
                                                      const uint64_t buffer_byte_size,
                                                      TRITONSERVER_MemoryType *memory_type,
                                                      int64_t *memory_type_id);
extern TRITONSERVER_Error *TRITONBACKEND_ResponseSend(TRITONBACKEND_Response *response,
                                                      const uint32_t send_flags,
                                                      TRITONSERVER_Error *error);

/* The entry points tritonserver looks up in a backend library. */
#define EXPORT __attribute__((visibility("default")))
EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend);
EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model);
EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model);
EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance *instance);
EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance *instance);
EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
    const uint32_t request_count);

/* Returns from the calling function when a Triton call fails. */
#define TRY(call)                                  \
  do {                                             \
    TRITONSERVER_Error *try_err_ = (call);         \
    if (try_err_) return try_err_;                 \
  } while (0)

#define MAX_IO 8

/* Drops an error nobody can act on (statistics, release). */
static void ignore(TRITONSERVER_Error *err) {
  if (err) TRITONSERVER_ErrorDelete(err);
}

/* ---- State ---- */

/* What ModelInitialize reads once: where model.pt is and the config's
 * input and output names in order (forward()'s arguments and results are
 * matched to them by position, as Triton's PyTorch backend does for
 * names of the INPUT__0 style). Owned by Triton's model via SetState;
 * read-only afterwards. */
struct shim_model {
  char *path;               /* owned (malloc) */
  size_t n_in, n_out;
  char *in_names[MAX_IO];   /* owned (strdup) */
  char *out_names[MAX_IO];  /* owned (strdup) */
};

/* One instance: its own module. Owned by Triton's instance via SetState;
 * used by the instance's thread only. */
struct shim_instance {
  struct shim_model *model; /* borrowed */
  struct pts_torch_module *module; /* owned */
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static TRITONSERVER_Error *errorf(int code, const char *fmt, const char *arg) {
  char msg[PTS_ERROR_MSG_MAX + 128];
  snprintf(msg, sizeof msg, fmt, arg);
  return TRITONSERVER_ErrorNew(code, msg);
}

static void model_free(struct shim_model *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_in; i++) free(m->in_names[i]);
  for (size_t i = 0; i < m->n_out; i++) free(m->out_names[i]);
  free(m->path);
  free(m);
}

/* Copies the "name" of each element of the config's array `key`. */
static TRITONSERVER_Error *read_names(json_t *config, const char *key, char **names,
                                      size_t *n) {
  json_t *arr = json_object_get(config, key);
  size_t i;
  json_t *el;
  if (!json_is_array(arr) || json_array_size(arr) > MAX_IO)
    return errorf(TS_ERROR_INVALID_ARG, "bench backend: config has no usable '%s' list", key);
  json_array_foreach(arr, i, el) {
    const char *name = json_string_value(json_object_get(el, "name"));
    if (!name) return errorf(TS_ERROR_INVALID_ARG, "bench backend: an entry of '%s' has no name", key);
    names[(*n)++] = strdup(name);
  }
  return NULL;
}

static TRITONSERVER_Error *model_read(TRITONBACKEND_Model *model, struct shim_model *m) {
  int artifact;
  const char *location, *json_text;
  uint64_t version;
  size_t json_size;
  TRITONSERVER_Message *msg;
  TRY(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  if (artifact != TS_ARTIFACT_FILESYSTEM)
    return errorf(TS_ERROR_UNSUPPORTED, "bench backend: %s is not on the local file system",
                  location);
  TRY(TRITONBACKEND_ModelVersion(model, &version));
  size_t len = strlen(location) + 32;
  m->path = malloc(len);
  if (!m->path) return errorf(TS_ERROR_INTERNAL, "bench backend: %s", "out of memory");
  snprintf(m->path, len, "%s/%llu/model.pt", location, (unsigned long long)version);

  TRY(TRITONBACKEND_ModelConfig(model, 1, &msg));
  TRITONSERVER_Error *err = TRITONSERVER_MessageSerializeToJson(msg, &json_text, &json_size);
  json_t *config = err ? NULL : json_loadb(json_text, json_size, 0, NULL);
  if (!err && !config)
    err = errorf(TS_ERROR_INTERNAL, "bench backend: %s", "config JSON does not parse");
  if (!err) err = read_names(config, "input", m->in_names, &m->n_in);
  if (!err) err = read_names(config, "output", m->out_names, &m->n_out);
  json_decref(config);
  TRITONSERVER_MessageDelete(msg);
  return err;
}

/* ---- Entry points ---- */

TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  uint32_t major, minor;
  TRY(TRITONBACKEND_ApiVersion(&major, &minor));
  /* Triton's rule: same major version, and the server's minor at least the
   * one the backend was written against. */
  if (major != API_MAJOR || minor < API_MINOR) {
    char v[32];
    snprintf(v, sizeof v, "%u.%u", major, minor);
    return errorf(TS_ERROR_UNSUPPORTED,
                  "bench backend: tritonserver's backend API %s is older than 1.19", v);
  }
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  struct shim_model *m = calloc(1, sizeof *m);
  if (!m) return errorf(TS_ERROR_INTERNAL, "bench backend: %s", "out of memory");
  TRITONSERVER_Error *err = model_read(model, m);
  if (!err) err = TRITONBACKEND_ModelSetState(model, m);
  if (err) model_free(m);
  return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *m;
  TRY(TRITONBACKEND_ModelState(model, &m));
  model_free(m);
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  TRITONBACKEND_Model *model;
  void *mstate;
  int kind;
  int32_t device_id;
  TRY(TRITONBACKEND_ModelInstanceModel(instance, &model));
  TRY(TRITONBACKEND_ModelState(model, &mstate));
  TRY(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  TRY(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
  struct shim_instance *in = calloc(1, sizeof *in);
  if (!in) return errorf(TS_ERROR_INTERNAL, "bench backend: %s", "out of memory");
  in->model = mstate;
  struct pts_device dev = {.type = PTS_DEVICE_CPU};
  if (kind == TS_INSTANCE_KIND_GPU)
    dev = (struct pts_device){.type = PTS_DEVICE_CUDA, .index = device_id};
  struct pts_error perr = {0};
  if (pts_torch_load(in->model->path, &dev, &in->module, &perr) != PTS_OK) {
    free(in);
    return errorf(TS_ERROR_INVALID_ARG, "bench backend: %s", perr.msg);
  }
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceSetState(instance, in);
  if (err) {
    pts_torch_free(in->module);
    free(in);
  }
  return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state;
  TRY(TRITONBACKEND_ModelInstanceState(instance, &state));
  struct shim_instance *in = state;
  pts_torch_free(in->module);
  free(in);
  return NULL;
}

/* Inputs of one request, in config order, as the bridge takes them. An
 * input that arrived in several buffers is joined into `joined` (owned by
 * the caller, freed after forward()). */
static TRITONSERVER_Error *gather_inputs(const struct shim_model *m, TRITONBACKEND_Request *req,
                                         struct pts_torch_input *ins, void **joined) {
  for (size_t i = 0; i < m->n_in; i++) {
    TRITONBACKEND_Input *input;
    const char *name;
    TRITONSERVER_DataType dt;
    const int64_t *shape;
    uint32_t ndim, nbuf;
    uint64_t bytes;
    TRY(TRITONBACKEND_RequestInput(req, m->in_names[i], &input));
    TRY(TRITONBACKEND_InputProperties(input, &name, &dt, &shape, &ndim, &bytes, &nbuf));
    ins[i] = (struct pts_torch_input){
        .name = m->in_names[i],
        .dtype = pts_dtype_from_name(TRITONSERVER_DataTypeString(dt)),
        .ndim = (int)ndim,
        .dims = shape,
        .byte_size = bytes,
        .mem = PTS_TORCH_MEM_HOST,
    };
    if (nbuf == 1) {
      const void *buf;
      uint64_t size;
      TRITONSERVER_MemoryType mt = TS_MEM_CPU;
      int64_t mid = 0;
      TRY(TRITONBACKEND_InputBuffer(input, 0, &buf, &size, &mt, &mid));
      if (mt != TS_MEM_CPU && mt != TS_MEM_CPU_PINNED)
        return errorf(TS_ERROR_UNSUPPORTED, "bench backend: input '%s' is not in CPU memory",
                      m->in_names[i]);
      ins[i].data = buf;
      continue;
    }
    char *dst = malloc(bytes ? bytes : 1);
    if (!dst) return errorf(TS_ERROR_INTERNAL, "bench backend: %s", "out of memory");
    joined[i] = dst;
    for (uint32_t b = 0; b < nbuf; b++) {
      const void *buf;
      uint64_t size;
      TRITONSERVER_MemoryType mt = TS_MEM_CPU;
      int64_t mid = 0;
      TRY(TRITONBACKEND_InputBuffer(input, b, &buf, &size, &mt, &mid));
      if (mt != TS_MEM_CPU && mt != TS_MEM_CPU_PINNED)
        return errorf(TS_ERROR_UNSUPPORTED, "bench backend: input '%s' is not in CPU memory",
                      m->in_names[i]);
      memcpy(dst, buf, size);
      dst += size;
    }
    ins[i].data = joined[i];
  }
  return NULL;
}

/* The response to one request: each requested output, copied from the
 * forward() result at its config position into a buffer Triton owns. */
static TRITONSERVER_Error *respond(const struct shim_model *m, TRITONBACKEND_Request *req,
                                   const struct pts_torch_outputs *outs) {
  TRITONBACKEND_Response *resp;
  uint32_t n;
  TRY(TRITONBACKEND_ResponseNew(&resp, req));
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(req, &n);
  for (uint32_t k = 0; !err && k < n; k++) {
    const char *name;
    size_t pos = 0;
    if ((err = TRITONBACKEND_RequestOutputName(req, k, &name))) break;
    while (pos < m->n_out && strcmp(m->out_names[pos], name) != 0) pos++;
    if (pos >= m->n_out || pos >= outs->count) {
      err = errorf(TS_ERROR_INVALID_ARG, "bench backend: the model returned no output '%s'", name);
      break;
    }
    const struct pts_torch_output *o = &outs->items[pos];
    TRITONBACKEND_Output *out;
    void *buf;
    TRITONSERVER_MemoryType mt = TS_MEM_CPU;
    int64_t mid = 0;
    err = TRITONBACKEND_ResponseOutput(resp, &out, name,
                                       TRITONSERVER_StringToDataType(pts_dtype_name(o->dtype)),
                                       o->dims, (uint32_t)o->ndim);
    if (!err) err = TRITONBACKEND_OutputBuffer(out, &buf, o->byte_size, &mt, &mid);
    if (!err && mt != TS_MEM_CPU && mt != TS_MEM_CPU_PINNED)
      err = errorf(TS_ERROR_UNSUPPORTED, "bench backend: output '%s' is not in CPU memory", name);
    if (!err) memcpy(buf, o->data, o->byte_size);
  }
  /* The response carries the error, if any, to the client; the error
   * stays ours to delete (Triton copies it). */
  TRITONSERVER_Error *send_err = TRITONBACKEND_ResponseSend(resp, TS_RESPONSE_COMPLETE_FINAL, err);
  if (err) {
    ignore(send_err);
    return err;
  }
  return send_err;
}

/* One request: inputs, forward(), response. A failure is the client's
 * answer (sent with the response when one exists). */
static bool run_one(struct shim_instance *in, TRITONBACKEND_Request *req, uint64_t *compute_start,
                    uint64_t *compute_end, uint64_t *rows) {
  const struct shim_model *m = in->model;
  struct pts_torch_input ins[MAX_IO];
  void *joined[MAX_IO] = {0};
  struct pts_torch_outputs outs = {0};
  const struct pts_torch_run_opts opts = {
      .inference_mode = true,      /* Triton's INFERENCE_MODE default */
      .optimized_execution = true, /* Triton's ENABLE_JIT_EXECUTOR default */
  };
  TRITONSERVER_Error *err = gather_inputs(m, req, ins, joined);
  /* The request's batch size, as Triton counts it for statistics: the
   * first dimension of its first input (the models here all batch). */
  *rows = !err && m->n_in && ins[0].ndim > 0 ? (uint64_t)ins[0].dims[0] : 1;
  *compute_start = now_ns();
  if (!err) {
    struct pts_error perr = {0};
    if (pts_torch_forward(in->module, ins, m->n_in, &opts, &outs, &perr) != PTS_OK)
      err = errorf(TS_ERROR_INTERNAL, "bench backend: %s", perr.msg);
  }
  *compute_end = now_ns();
  for (size_t i = 0; i < MAX_IO; i++) free(joined[i]);
  if (err) {
    TRITONBACKEND_Response *resp;
    TRITONSERVER_Error *new_err = TRITONBACKEND_ResponseNew(&resp, req);
    if (!new_err) ignore(TRITONBACKEND_ResponseSend(resp, TS_RESPONSE_COMPLETE_FINAL, err));
    ignore(new_err);
  } else {
    err = respond(m, req, &outs);
  }
  bool ok = !err;
  ignore(err);
  pts_torch_outputs_free(&outs);
  return ok;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                       TRITONBACKEND_Request **requests,
                                                       const uint32_t request_count) {
  void *state;
  TRY(TRITONBACKEND_ModelInstanceState(instance, &state));
  struct shim_instance *in = state;
  uint64_t batch = 0, first_start = now_ns(), cs = first_start, ce = first_start;
  for (uint32_t r = 0; r < request_count; r++) {
    uint64_t start = now_ns(), compute_start, compute_end, rows;
    bool ok = run_one(in, requests[r], &compute_start, &compute_end, &rows);
    if (r == 0) cs = compute_start;
    ce = compute_end;
    ignore(TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], ok, start,
                                                       compute_start, compute_end, now_ns()));
    ignore(TRITONBACKEND_RequestRelease(requests[r], TS_REQUEST_RELEASE_ALL));
    batch += rows;
  }
  ignore(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, batch, first_start, cs, ce,
                                                          now_ns()));
  return NULL;
}
