/* backends/pytorch/callspec.h — the tensor names of an AOTInductor package,
 * from its call specification.
 *
 * torch.export flattens forward()'s (args, kwargs) and its result with
 * torch.utils._pytree; the compiled package runs on the two flat lists of
 * tensors and keeps the tree specs as JSON strings (treespec_dumps format:
 * [1, {"type": "builtins.tuple", "context": "null", "children_spec": [...]}],
 * a leaf has "type": null). This module turns those trees into the tensor
 * names Triton's PyTorch backend gives AOTInductor models (triton-anchor
 * §1.4) and resolves a config tensor name to its flat position:
 *
 *   forward-based  ARGS[0], ARGS[1][key], KWARGS[name], RESULT, RESULT[key][0]
 *   ordinal        <anything>__<n> = leaf n in flat order (INPUT__0, OUTPUT__1)
 *
 * Containers may be tuples, lists, named tuples and dicts (dict keys are
 * strings without '[', ']', '"' or white space, so every name is
 * unambiguous); anything else is refused with a message naming its type and
 * where it sits. A leaf is assumed to be a tensor: the spec does not say,
 * and the package itself refuses a wrong count of inputs at run time.
 *
 * Pure C over jansson: unit-tested without LibTorch (tests/unit/pytorch).
 * Threading: a parsed spec is immutable; any thread may read it.
 */
#ifndef PTS_BACKENDS_PYTORCH_CALLSPEC_H
#define PTS_BACKENDS_PYTORCH_CALLSPEC_H

#include <stddef.h>

#include "core/status.h"

struct pts_callspec;

enum pts_callspec_side { PTS_CALLSPEC_INPUTS, PTS_CALLSPEC_OUTPUTS };

/* Parses the input and output specs (the two strings of the package's
 * get_call_spec()). The input spec must be the (args, kwargs) pair
 * torch.export writes. Caller frees *out with pts_callspec_free. Errors
 * (INVALID_ARG) say which spec and where in it. */
enum pts_status pts_callspec_parse(const char *in_spec, const char *out_spec,
                                   struct pts_callspec **out, struct pts_error *err);
void pts_callspec_free(struct pts_callspec *cs); /* NULL-safe */

/* Number of leaves (tensors) on one side. */
size_t pts_callspec_count(const struct pts_callspec *cs, enum pts_callspec_side side);

/* Forward-based name of leaf i ("ARGS[0]", "RESULT[sum]"). Borrowed until
 * pts_callspec_free. */
const char *pts_callspec_name(const struct pts_callspec *cs, enum pts_callspec_side side,
                              size_t i);

/* Flat position of a config tensor name: an exact forward-based name, else
 * an ordinal <anything>__<n> with n < count. Errors (INVALID_ARG): a name
 * that matches nothing, with the names the package has; a name of a
 * container (ARGS[1] when ARGS[1] is a dict), with the names inside it. */
enum pts_status pts_callspec_resolve(const struct pts_callspec *cs, enum pts_callspec_side side,
                                     const char *name, size_t *index, struct pts_error *err);

/* "ARGS[0], ARGS[1], KWARGS[scale]" — the names of one side for messages,
 * cut with "..." to fit out (always NUL-terminated). */
void pts_callspec_list(const struct pts_callspec *cs, enum pts_callspec_side side, char *out,
                       size_t out_size);

#endif
