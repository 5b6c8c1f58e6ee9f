/* core/host_policy.h — tritonserver's host policies
 * (--host-policy=<name>,<setting>=<value>): named settings that bind the
 * threads of the model instances that use them, as Triton's numa_utils do.
 *
 *   cpu-cores=<lo>-<hi>[,<lo>-<hi>...]  the instance's thread (and the
 *                                       threads it starts, such as
 *                                       LibTorch's intra-op pool) run only
 *                                       on those CPUs;
 *   numa-node=<n>                       its memory comes from that NUMA node
 *                                       (set_mempolicy MPOL_BIND).
 *
 * An instance uses the policy its instance group names (`host_policy`),
 * else "cpu" (KIND_CPU), "gpu_<id>" (KIND_GPU) or "model" (KIND_MODEL), so
 * `--host-policy=gpu_0,numa-node=0` binds every instance on GPU 0. A name
 * with no policy binds nothing.
 *
 * Threading: pts_host_policy_add runs at start-up, before any model loads;
 * everything else reads the table without a lock.
 */
#ifndef PTS_CORE_HOST_POLICY_H
#define PTS_CORE_HOST_POLICY_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* One --host-policy value. INVALID_ARG, in Triton's words where it has
 * some, for a malformed value, an unknown setting, a CPU this machine does
 * not have or a NUMA node it does not have. */
enum pts_status pts_host_policy_add(const char *spec, struct pts_error *err);

/* Forgets every policy (tests). */
void pts_host_policy_reset(void);

/* Whether `name` has a policy that binds anything. */
bool pts_host_policy_binds(const char *name);

/* The policy's CPUs, for pthread_attr_setaffinity_np; false when it sets
 * none. */
bool pts_host_policy_cpus(const char *name, cpu_set_t *out);

/* On the calling thread: the policy's memory binding, if it has one. */
enum pts_status pts_host_policy_bind_memory(const char *name, struct pts_error *err);

#endif
