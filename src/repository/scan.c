/* repository/scan.c — see scan.h. */
#include "repository/scan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/log.h"

/* How deep the poll fingerprint looks below a model directory. */
#define FINGERPRINT_DEPTH 8

char *pts_scan_path_join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  bool slash = la > 0 && a[la - 1] == '/';
  char *p = pts_malloc(la + lb + 2);
  if (!p) return NULL;
  memcpy(p, a, la);
  if (!slash) p[la++] = '/';
  memcpy(p + la, b, lb + 1);
  return p;
}

bool pts_scan_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Triton's rule: a version directory is named by a positive decimal number
 * without a leading zero; anything else is ignored. */
static bool parse_version(const char *name, int64_t *out) {
  if (name[0] < '1' || name[0] > '9') return false;
  int64_t v = 0;
  for (const char *p = name; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    if (v > (INT64_MAX - (*p - '0')) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Says why directory `name` of a model is not a version, as Triton does
 * when it lists the versions. */
static void warn_not_version(const char *dir, const char *name) {
  static const char *const own[] = {"warmup", "initial_state", "configs"};
  if (name[0] == '.') return;
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (strcmp(name, own[i]) == 0) return;
  char *p = pts_scan_path_join(dir, name);
  bool is_dir = p && pts_scan_is_dir(p);
  pts_free(p);
  if (!is_dir) return;
  if (name[0] == '0' && name[1])
    PTS_LOG_WARN("ignore version directory '%s' which contains leading zeros in its directory "
                 "name (model directory '%s')",
                 name, dir);
  else if (name[0] < '0' || name[0] > '9' || name[strspn(name, "0123456789")])
    PTS_LOG_WARN("ignore version directory '%s' which fails to convert to integral number "
                 "(model directory '%s')",
                 name, dir);
}

enum pts_status pts_scan_versions(const char *dir, bool warn, int64_t **out, size_t *n,
                                  struct pts_error *err) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d)
    return pts_error_set(err, PTS_INTERNAL, "failed to open model directory '%s': %s", dir,
                         strerror(errno));
  size_t cap = 0;
  struct dirent *e;
  enum pts_status st = PTS_OK;
  while ((e = readdir(d)) != NULL) {
    int64_t v;
    if (!parse_version(e->d_name, &v)) {
      if (warn) warn_not_version(dir, e->d_name);
      continue;
    }
    char *p = pts_scan_path_join(dir, e->d_name);
    bool dir_ok = p && pts_scan_is_dir(p);
    pts_free(p);
    if (!dir_ok) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      int64_t *grown = pts_realloc(*out, cap * sizeof **out);
      if (!grown) {
        st = pts_error_set(err, PTS_NOMEM, "out of memory listing '%s'", dir);
        break;
      }
      *out = grown;
    }
    (*out)[(*n)++] = v;
  }
  closedir(d);
  if (st != PTS_OK) {
    pts_free(*out);
    *out = NULL;
    *n = 0;
    return st;
  }
  if (*n) qsort(*out, *n, sizeof **out, cmp_i64);
  return PTS_OK;
}

/* A model directory holds config.pbtxt or at least one version directory. */
bool pts_scan_is_model(const char *dir) {
  char *cfg = pts_scan_path_join(dir, "config.pbtxt");
  bool yes = cfg && is_file(cfg);
  pts_free(cfg);
  if (yes) return true;
  int64_t *versions = NULL;
  size_t n = 0;
  if (pts_scan_versions(dir, false, &versions, &n, NULL) != PTS_OK) return false;
  pts_free(versions);
  return n > 0;
}

/* FNV-1a, 64 bit: a change detector, not a defence. */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hashes the names, types, sizes and modification times of everything
 * below `dir`, in name order (readdir's order is not stable). */
static uint64_t fingerprint_dir(const char *dir, int depth, uint64_t h) {
  DIR *d = opendir(dir);
  if (!d) return fnv(h, "?", 1);
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      char **grown = pts_realloc(names, ncap * sizeof *grown);
      if (!grown) break;
      names = grown;
      cap = ncap;
    }
    if (!(names[n] = pts_strdup(e->d_name))) break;
    n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    h = fnv(h, names[i], strlen(names[i]) + 1);
    char *p = pts_scan_path_join(dir, names[i]);
    struct stat st;
    if (p && stat(p, &st) == 0) {
      int64_t facts[5] = {(int64_t)(st.st_mode & S_IFMT), (int64_t)st.st_size,
                          (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec,
                          (int64_t)st.st_ino};
      h = fnv(h, facts, sizeof facts);
      if (S_ISDIR(st.st_mode) && depth > 0) h = fingerprint_dir(p, depth - 1, h);
    } else {
      h = fnv(h, "!", 1);
    }
    pts_free(p);
    pts_free(names[i]);
  }
  pts_free(names);
  return h;
}

uint64_t pts_scan_fingerprint(const char *dir) {
  return fingerprint_dir(dir, FINGERPRINT_DEPTH, 0xcbf29ce484222325ull);
}

/* ---------------------------------------------------------- repositories */

void pts_scan_candidates_free(struct pts_scan_candidate *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    pts_free(c[i].name);
    pts_free(c[i].dir);
  }
  pts_free(c);
}

enum pts_status pts_scan_repository(const char *repo, struct pts_scan_candidate **list,
                                    size_t *n, size_t *cap, struct pts_error *err) {
  DIR *d = opendir(repo);
  if (!d)
    return pts_error_set(err, PTS_INVALID_ARG, "failed to open model repository '%s': %s", repo,
                         strerror(errno));
  struct dirent *e;
  enum pts_status st = PTS_OK;
  while (st == PTS_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char *dir = pts_scan_path_join(repo, e->d_name);
    if (!dir) {
      st = pts_error_set(err, PTS_NOMEM, "out of memory scanning '%s'", repo);
      break;
    }
    if (!pts_scan_is_dir(dir) || !pts_scan_is_model(dir)) {
      pts_free(dir);
      continue;
    }
    if (*n == *cap) {
      size_t ncap = *cap ? *cap * 2 : 16;
      struct pts_scan_candidate *grown = pts_realloc(*list, ncap * sizeof *grown);
      if (!grown) {
        pts_free(dir);
        st = pts_error_set(err, PTS_NOMEM, "out of memory scanning '%s'", repo);
        break;
      }
      *list = grown;
      *cap = ncap;
    }
    struct pts_scan_candidate *c = &(*list)[*n];
    c->name = pts_strdup(e->d_name);
    c->dir = dir;
    c->repo = repo;
    if (!c->name) {
      pts_free(dir);
      st = pts_error_set(err, PTS_NOMEM, "out of memory scanning '%s'", repo);
      break;
    }
    (*n)++;
  }
  closedir(d);
  return st;
}

int pts_scan_cmp_candidate(const void *a, const void *b) {
  const struct pts_scan_candidate *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  return strcmp(x->dir, y->dir);
}

