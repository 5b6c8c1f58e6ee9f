/* config/json_arena.h — scratch memory for jansson while one request
 * header is parsed and decoded.
 *
 * jansson allocates every value, key and string of a parsed document
 * separately: a KServe inference header of a few hundred bytes costs about
 * 150 malloc/free pairs, which on the CPU hot path was the largest single
 * cost after the JSON parse itself (docs/experiments/hotpath, issue #13). Between
 * pts_json_arena_begin and pts_json_arena_end, this thread's jansson
 * allocations are carved from a per-thread buffer instead (bumped, never
 * freed one by one); what does not fit goes to malloc as usual. end resets
 * the buffer, so every value parsed in between must be gone by then (the
 * caller json_decref's its document first, and keeps nothing of it: strings
 * it wants are copied).
 *
 * Outside begin/end, and on threads that never call begin, jansson uses
 * malloc and free exactly as it does by default.
 *
 * Ownership: the buffer is thread-local storage; nothing to free.
 * Threading: pts_json_arena_install once, in main(), before any thread
 * starts (json_set_alloc_funcs is process-wide and not synchronised);
 * begin/end on any thread, for that thread, not nested.
 */
#ifndef PTS_CONFIG_JSON_ARENA_H
#define PTS_CONFIG_JSON_ARENA_H

/* Makes jansson allocate through the arena's functions (malloc and free
 * unless a begin is active on the calling thread). */
void pts_json_arena_install(void);

void pts_json_arena_begin(void);

/* Every arena allocation since begin is released at once. */
void pts_json_arena_end(void);

#endif
