/* core/asan.h — telling AddressSanitizer about memory ptserve recycles.
 *
 * Memory that ptserve keeps for reuse (an object in a pool, the unused part
 * of an arena) is poisoned while nobody may touch it, so that ASan builds
 * still report a use after free or an overflow into it as they would for
 * memory given back to malloc. Without ASan the macros do nothing.
 *
 * Threading: the macros act on shadow memory of the range only; whoever
 * owns the range may call them.
 */
#ifndef PTS_CORE_ASAN_H
#define PTS_CORE_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define PTS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PTS_ASAN 1
#endif
#endif

#ifdef PTS_ASAN
#include <sanitizer/asan_interface.h>
#define PTS_ASAN_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define PTS_ASAN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define PTS_ASAN_POISON(p, n) ((void)(p), (void)(n))
#define PTS_ASAN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
