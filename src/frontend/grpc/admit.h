/* frontend/grpc/admit.h — a ModelInferRequest message into the core and
 * its response out of it, for either transport (grpc.c on gRPC core, h2_call.c
 * on nghttp2): the request memory budget, decoding, tracing, encoding.
 *
 * Threading: pts_grpc_admit runs on the transport's thread;
 * pts_grpc_encode_done on whichever thread completes the inference. Both
 * touch only their arguments and thread-safe server state (the budget).
 */
#ifndef PTS_FRONTEND_GRPC_ADMIT_H
#define PTS_FRONTEND_GRPC_ADMIT_H

#include <stdbool.h>

#include "core/buf.h"
#include "core/status.h"
#include "frontend/grpc/infer.h"
#include "scheduler/request.h"

/* Charges msg->size to the request memory budget (core/overload.h,
 * shared with HTTP; RESOURCE_EXHAUSTED when it does not fit), decodes the
 * message (`msg` borrowed: raw inputs keep their own references) and
 * re-charges the request what it holds decoded. The request's completion
 * calls done(…, ctx); its trace starts here. NULL with err set when the
 * message is refused or bad. Caller owns the request. */
struct pts_infer_request *pts_grpc_admit(struct pts_buf *msg, pts_infer_done_fn done, void *ctx,
                                         struct pts_error *err);

/* The end of one inference: marks GRPC_SEND_START, then either fills
 * *reply with the encoded response (the reply owns its bytes) or sets err
 * (the inference's own error `ierr`, or an encoding failure). req and resp
 * stay the caller's. */
void pts_grpc_encode_done(const struct pts_infer_request *req,
                          const struct pts_infer_response *resp, const struct pts_error *ierr,
                          bool stream, struct pts_grpc_reply *reply, struct pts_error *err);

/* The request id of a message that could not be admitted, for a stream's
 * in-band error: protobuf-c on the whole message, best effort. Caller
 * frees; NULL when there is none. */
char *pts_grpc_request_id(struct pts_buf *msg);

#endif
