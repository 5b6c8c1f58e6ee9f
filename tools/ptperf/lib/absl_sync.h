/* ptperf/lib/absl_sync.h — abseil's mutex deadlock detector, off.
 *
 * gRPC core, ptperf's gRPC client (the server serves gRPC on nghttp2 and
 * links no gRPC core), takes its locks through absl::Mutex. Debian builds
 * abseil without NDEBUG, and in such a build every Lock and Unlock also
 * runs abseil's deadlock detector (a global graph of lock ids, a
 * per-thread list of held locks): about a tenth of the instructions of a
 * small ModelInfer call (docs/internals/grpc.md). ptperf shares the
 * server's cores in every benchmark, so its cost is the server's
 * throughput too. abseil's own switch for it,
 * absl::SetMutexDeadlockDetectionMode, is a C++ function; nothing but the
 * pytorch bridge includes C++ headers, so it is found with dlsym under its
 * mangled name, which CMake derives from abseil's inline namespace
 * (PTS_ABSL_SYM; where gRPC is linked statically, ptperf exports
 * that symbol for dlsym). Where the name is not found (another abseil, or
 * one built with NDEBUG, where the detector never runs), nothing changes.
 *
 * Threading: call before grpc_init, before gRPC starts its threads
 * (ptperf's gRPC load); calling it again is harmless.
 */
#ifndef PTS_PTPERF_ABSL_SYNC_H
#define PTS_PTPERF_ABSL_SYNC_H

#include <stdbool.h>

/* Turns the detector off; true when abseil's switch was found and called. */
bool pts_absl_detector_off(void);

#endif
