/* scheduler/rate_limit.h — tritonserver's rate limiter (core/src/rate_limiter.cc,
 * r25.07): --rate-limit=execution_count|off and
 * --rate-limit-resource=<name>:<count>[:<device>].
 *
 * Off (the default, as in tritonserver) it does nothing, and an instance
 * group's rate_limiter is accepted and ignored. With execution_count every
 * model instance (ensembles have none) waits, before each execution, until
 * the rate limiter allots it:
 *  - resources: an instance group's rate_limiter { resources [{ name count
 *    global }] } is what each of its instances holds while it executes; a
 *    resource is per device (the instance's GPU; CPU instances count as
 *    device 0) unless `global`, shared by all. How many of a resource there
 *    are: --rate-limit-resource's count for it (on that device, or on every
 *    device without <device>; a global resource takes the largest count
 *    given for its name), else the most any one instance asks for. With
 *    any --rate-limit-resource given, a resource it does not name has none.
 *  - order: of the instances waiting, the one with the smallest
 *    executions × max(priority, 1) goes next (ties: the one waiting
 *    longest), when its resources are free; the others wait behind it,
 *    as Triton's staged queue has them.
 * Loading an instance fails, in tritonserver's words, when a resource is
 * both global and per device, or when --rate-limit-resource allows fewer
 * than an instance needs. As tritonserver, the flag's value is lower-cased,
 * so it can only name resources whose names are lower case.
 *
 * Threading: pts_rate_limit_set_mode and _add_resource run at start-up,
 * before any model loads; the rest on any thread (one process-wide mutex).
 */
#ifndef PTS_SCHEDULER_RATE_LIMIT_H
#define PTS_SCHEDULER_RATE_LIMIT_H

#include <stdbool.h>

#include "core/status.h"
#include "model_config.pb-c.h"

/* --rate-limit: "execution_count" or "off", in any case. */
enum pts_status pts_rate_limit_set_mode(const char *value, struct pts_error *err);
/* One --rate-limit-resource value. */
enum pts_status pts_rate_limit_add_resource(const char *spec, struct pts_error *err);
/* Whether --rate-limit=execution_count is in force. */
bool pts_rate_limit_on(void);
/* Back to off with no resources (tests; every instance unregistered). */
void pts_rate_limit_reset(void);

struct pts_rate_limit_instance;

/* Registers one model instance with its group's `cfg` (NULL: none) on
 * `device` (-1: not a GPU). *out is NULL when the rate limiter is off.
 * INVALID_ARG, nothing registered, when the resources can not be
 * satisfied (above). Free with pts_rate_limit_unregister. */
enum pts_status pts_rate_limit_register(const Inference__ModelRateLimiter *cfg, int device,
                                        struct pts_rate_limit_instance **out,
                                        struct pts_error *err);
/* Once the instance will not execute again. NULL-safe. */
void pts_rate_limit_unregister(struct pts_rate_limit_instance *in);

/* Blocks until `in` may execute and holds its resources; release after the
 * execution, saying whether its model has `more` requests waiting (then it
 * waits for its next turn at once, as Triton stages it again). All three
 * NULL-safe (no rate limiting); acquire never on an event loop. */
void pts_rate_limit_acquire(struct pts_rate_limit_instance *in);
void pts_rate_limit_release(struct pts_rate_limit_instance *in, bool more);
/* The instance found nothing to run after all: it stops waiting, and gives
 * back what it was allotted meanwhile. May be called with the scheduler's
 * lock held (the rate limiter never calls back). */
void pts_rate_limit_withdraw(struct pts_rate_limit_instance *in);

#endif
