/* tests/unit/server/fs_helpers.h — temporary model repositories for the
 * repository, scheduler and server tests: make a directory tree, write
 * config.pbtxt files, remove it all afterwards. Header-only (static
 * functions), so each test binary stays one file. */
#ifndef PTS_TEST_FS_HELPERS_H
#define PTS_TEST_FS_HELPERS_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p below `root`; `rel` like "m/1". Returns 0 or -1. */
static int fs_mkdirs(const char *root, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && access(path, F_OK) != 0) return -1;
    *p = '/';
  }
  return mkdir(path, 0755) == 0 || access(path, F_OK) == 0 ? 0 : -1;
}

static int fs_write(const char *root, const char *rel, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* A fresh directory under /tmp; caller removes it with fs_rmtree. */
static char *fs_tempdir(char *buf, size_t size) {
  snprintf(buf, size, "/tmp/pts_unit_XXXXXX");
  return mkdtemp(buf);
}

static int fs_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void fs_rmtree(const char *root) { nftw(root, fs_rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* An identity model: one INT32 input [2] echoed as one INT32 output, with
 * extra config text appended (a version policy, an instance group...). */
static int fs_identity_model(const char *root, const char *name, int max_batch, const char *extra) {
  char text[2048], rel[512];
  snprintf(text, sizeof text,
           "name: \"%s\"\nbackend: \"identity\"\nmax_batch_size: %d\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n%s\n",
           name, max_batch, extra ? extra : "");
  if (fs_mkdirs(root, name) != 0) return -1;
  snprintf(rel, sizeof rel, "%s/config.pbtxt", name);
  return fs_write(root, rel, text);
}

#endif
