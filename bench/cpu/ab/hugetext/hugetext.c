/* bench/cpu/ab/hugetext/hugetext.c — an LD_PRELOAD experiment, not part of
 * ptserve: at load, before main, it moves the executable code of ptserve,
 * LibTorch and c10 onto 2 MiB pages, to see whether the instruction TLB is
 * what makes a request at concurrency 1 dear on a VM whose virtual CPUs
 * halt between requests (bench/cpu/floor, bench/cpu/haltpoll).
 *
 * This kernel has no CONFIG_READ_ONLY_THP_FOR_FS, so a file's text cannot
 * be mapped with huge pages where it lies. Each r-x mapping whose file
 * name holds one of HUGETEXT_MATCH's comma-separated words (default:
 * ptserve, libtorch_cpu.so, libc10.so) is copied into anonymous memory with
 * MADV_HUGEPAGE (transparent huge pages in "madvise" mode suffice), at the
 * same offset modulo 2 MiB, made r-x and moved over the original with
 * mremap: the same bytes at the same addresses, so nothing that points
 * into them changes. It runs from a constructor, before ptserve starts a
 * thread. The copy is private memory: LibTorch's text adds about 330 MB
 * to the process's RSS.
 *
 * HUGETEXT_REPORT names a file to which it appends what it moved and the
 * process's AnonHugePages afterwards (the proof that huge pages back it). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_SZ ((uintptr_t)2 << 20)
#define MAX_MAPS 64

struct text_map {
  uintptr_t start, end;
  char path[256];
};

/* Matched against the file's name, not its path: a checkout under a folder
 * named ptserve would otherwise take in every library of its venv. */
static int wanted(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  const char *m = getenv("HUGETEXT_MATCH");
  char words[512];
  snprintf(words, sizeof words, "%s", m ? m : "ptserve,libtorch_cpu.so,libc10.so");
  char *save = NULL;
  for (char *w = strtok_r(words, ",", &save); w; w = strtok_r(NULL, ",", &save))
    if (strstr(name, w)) return 1;
  return 0;
}

/* Fills `out` with the r-x file mappings to move; returns how many. The
 * list is read whole before anything moves: mremap changes /proc/self/maps. */
static int text_maps(struct text_map *out) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  int n = 0;
  char line[1024];
  while (n < MAX_MAPS && fgets(line, sizeof line, f)) {
    unsigned long a, b;
    char perm[8], path[256] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &a, &b, perm, path) < 3) continue;
    if (strcmp(perm, "r-xp") != 0 || !wanted(path)) continue;
    out[n].start = a;
    out[n].end = b;
    snprintf(out[n].path, sizeof out[n].path, "%s", path);
    n++;
  }
  fclose(f);
  return n;
}

/* Copies one mapping into huge-page-backed anonymous memory and moves the
 * copy over it. Returns 0, or -1 with the original left in place. */
static int move_to_huge_pages(const struct text_map *m) {
  size_t len = m->end - m->start;
  /* room for the copy at the original's offset within a 2 MiB page */
  uint8_t *room = mmap(NULL, len + 2 * HUGE_SZ, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (room == MAP_FAILED) return -1;
  uintptr_t at = ((uintptr_t)room + HUGE_SZ - 1) & ~(HUGE_SZ - 1);
  at += m->start & (HUGE_SZ - 1);
  madvise((void *)at, len, MADV_HUGEPAGE);
  memcpy((void *)at, (const void *)m->start, len);
  if (mprotect((void *)at, len, PROT_READ | PROT_EXEC) != 0 ||
      mremap((void *)at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)m->start) == MAP_FAILED) {
    munmap(room, len + 2 * HUGE_SZ);
    return -1;
  }
  /* what is left of `room` on either side of the moved copy */
  if (at > (uintptr_t)room) munmap(room, at - (uintptr_t)room);
  uintptr_t tail = at + len, room_end = (uintptr_t)room + len + 2 * HUGE_SZ;
  if (room_end > tail) munmap((void *)tail, room_end - tail);
  return 0;
}

static long anon_huge_kb(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

__attribute__((constructor)) static void hugetext(void) {
  struct text_map maps[MAX_MAPS];
  int n = text_maps(maps);
  const char *report = getenv("HUGETEXT_REPORT");
  FILE *r = report ? fopen(report, "a") : NULL;
  for (int i = 0; i < n; i++) {
    int rc = move_to_huge_pages(&maps[i]);
    if (r)
      fprintf(r, "%s: %zu KiB %s\n", maps[i].path, (size_t)(maps[i].end - maps[i].start) >> 10,
              rc == 0 ? "moved" : "left in place (mmap, mprotect or mremap failed)");
  }
  if (r) {
    fprintf(r, "AnonHugePages after the move: %ld kB\n", anon_huge_kb());
    fclose(r);
  }
}
