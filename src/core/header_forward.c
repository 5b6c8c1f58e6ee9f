/* core/header_forward.c — see header_forward.h. */
#include "core/header_forward.h"

#include <regex.h>
#include <string.h>

#include "core/alloc.h"

static const char *const FLAG[] = {[PTS_FORWARD_HTTP] = "--http-header-forward-pattern",
                                   [PTS_FORWARD_GRPC] = "--grpc-header-forward-pattern"};

static struct {
  bool set;
  regex_t re;
} patterns[2];

/* RE2 syntax that POSIX ERE lacks or reads differently: refused rather
 * than matched as something else (glibc takes "\d" for a plain "d"). */
static const char *re2_only(const char *p) {
  for (const char *c = p; *c; c++) {
    if (c[0] == '[') { /* a bracket expression's characters are literal: skip it */
      const char *e = c + 1 + (c[1] == '^');
      if (*e == ']') e++;
      while (*e && *e != ']') e++;
      if (!*e) return NULL; /* unterminated: regcomp says so */
      c = e;
      continue;
    }
    if (c[0] == '\\' && c[1] && strchr("dDpPQEAzC", c[1])) return "a \\d-style escape";
    if (c[0] == '(' && c[1] == '?') return "a (?...) group";
    if (strchr("*+?}", c[0]) && c[1] == '?') return "a lazy quantifier";
    if (c[0] == '\\' && c[1]) c++;
  }
  return NULL;
}

enum pts_status pts_header_forward_set(enum pts_forward_proto proto, const char *pattern,
                                       struct pts_error *err) {
  const char *flag = FLAG[proto];
  /* An empty pattern matches every name: tritonserver's becomes "(?i)". */
  if (!*pattern) pattern = ".*";
  const char *why = re2_only(pattern);
  if (why)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s '%s': the pattern uses %s, which ptserve's POSIX extended regular "
                         "expressions do not have (write [0-9] for \\d, drop the '?' of a lazy "
                         "quantifier; case is ignored already)",
                         flag, pattern, why);
  regex_t re;
  int rc = regcomp(&re, pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB);
  if (rc != 0) {
    char msg[128];
    regerror(rc, &re, msg, sizeof msg);
    return pts_error_set(err, PTS_INVALID_ARG, "%s '%s' is not a valid regular expression: %s",
                         flag, pattern, msg);
  }
  if (patterns[proto].set) regfree(&patterns[proto].re);
  patterns[proto].re = re;
  patterns[proto].set = true;
  return PTS_OK;
}

bool pts_header_forward_match(enum pts_forward_proto proto, const char *name, size_t len) {
  if (!patterns[proto].set) return false;
  char small[256];
  char *s = len < sizeof small ? small : pts_malloc(len + 1);
  if (!s) return false;
  memcpy(s, name, len);
  s[len] = '\0';
  bool match = regexec(&patterns[proto].re, s, 0, NULL, 0) == 0;
  if (s != small) pts_free(s);
  return match;
}

void pts_header_forward_reset(void) {
  for (size_t i = 0; i < 2; i++) {
    if (patterns[i].set) regfree(&patterns[i].re);
    patterns[i].set = false;
  }
}
