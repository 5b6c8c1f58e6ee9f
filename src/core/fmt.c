/* core/fmt.c — see fmt.h. */
#include "core/fmt.h"

#include <string.h>

size_t pts_fmt_u64(char *out, uint64_t v) {
  char tmp[PTS_FMT_INT_MAX];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = '\0';
  return n;
}

size_t pts_fmt_i64(char *out, int64_t v) {
  if (v >= 0) return pts_fmt_u64(out, (uint64_t)v);
  out[0] = '-';
  /* -(v + 1) + 1 keeps INT64_MIN from overflowing. */
  return 1 + pts_fmt_u64(out + 1, (uint64_t)(-(v + 1)) + 1u);
}

static void two(char *out, int v) {
  out[0] = (char)('0' + v / 10 % 10);
  out[1] = (char)('0' + v % 10);
}

size_t pts_fmt_http_date(char *out, time_t t) {
  static const char days[] = "SunMonTueWedThuFriSat";
  static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  struct tm tm;
  gmtime_r(&t, &tm);
  memcpy(out, days + 3 * tm.tm_wday, 3);
  out[3] = ',';
  out[4] = ' ';
  two(out + 5, tm.tm_mday);
  out[7] = ' ';
  memcpy(out + 8, months + 3 * tm.tm_mon, 3);
  out[11] = ' ';
  int year = tm.tm_year + 1900; /* four digits until the year 10000 */
  two(out + 12, year / 100);
  two(out + 14, year % 100);
  out[16] = ' ';
  two(out + 17, tm.tm_hour);
  out[19] = ':';
  two(out + 20, tm.tm_min);
  out[22] = ':';
  two(out + 23, tm.tm_sec);
  memcpy(out + 25, " GMT", 5); /* with the NUL */
  return 29;
}

const char *pts_fmt_http_date_now(void) {
  static _Thread_local time_t cached_at = (time_t)-1;
  static _Thread_local char cached[PTS_FMT_DATE_MAX];
  time_t now = time(NULL);
  if (now != cached_at) {
    pts_fmt_http_date(cached, now);
    cached_at = now;
  }
  return cached;
}
