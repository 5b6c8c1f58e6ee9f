/* tests/unit/net/tls_pki.h — certificates for the TLS tests, made with
 * OpenSSL's API in a temporary directory: a CA, a server certificate it
 * signed for localhost and 127.0.0.1 that also names 400 other hosts (12
 * KB: more than the smallest socket buffer holds, so the server's
 * handshake must wait to write), client certificates it signed (one
 * expired), another CA and a client of its own, a key that matches
 * nothing, the same key under a pass phrase, and a file that is no
 * certificate. Each <name>.pem has its key in <name>.key. Header-only
 * (static functions), for tls_test.c and grpc_h2_test.c; it asserts with
 * cmocka, so it comes after <cmocka.h>. */
#ifndef PTS_TEST_TLS_PKI_H
#define PTS_TEST_TLS_PKI_H

#include <ftw.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char pki_dir[64]; /* the certificates' temporary directory */

/* <pki_dir>/<name>, in one of 8 buffers used in turn. */
static const char *pki_file(const char *name) {
  static char paths[8][128];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", pki_dir, name);
  return p;
}

/* ------------------------------------------------------------------ */
/* certificates                                                        */

static X509 *pki_make_cert(EVP_PKEY *key, const char *cn, const char *san, X509 *issuer,
                       EVP_PKEY *issuer_key, long from_s, long to_s, bool ca) {
  static long serial = 1;
  X509 *x = X509_new();
  assert_non_null(x);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), from_s);
  X509_gmtime_adj(X509_getm_notAfter(x), to_s);
  X509_set_pubkey(x, key);
  X509_NAME *name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
  X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
  X509_EXTENSION *ext =
      X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  if (san) {
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
    assert_non_null(ext);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  assert_true(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
  return x;
}

static void pki_write_cert(X509 *x, const char *name) {
  FILE *f = fopen(pki_file(name), "w");
  assert_non_null(f);
  assert_int_equal(PEM_write_X509(f, x), 1);
  fclose(f);
}

static void pki_write_key(EVP_PKEY *k, const char *name, const char *pass) {
  FILE *f = fopen(pki_file(name), "w");
  assert_non_null(f);
  assert_int_equal(PEM_write_PrivateKey(f, k, pass ? EVP_aes_128_cbc() : NULL,
                                        (unsigned char *)pass, pass ? (int)strlen(pass) : 0,
                                        NULL, NULL),
                   1);
  fclose(f);
}

/* A key and a certificate `issuer` signed (itself when NULL), as
 * <name>.pem and <name>.key. */
static EVP_PKEY *pki_issue(const char *name, const char *san, X509 *issuer, EVP_PKEY *issuer_key,
                       long from_s, long to_s, bool ca, X509 **cert_out) {
  EVP_PKEY *k = EVP_EC_gen("P-256");
  assert_non_null(k);
  X509 *x = pki_make_cert(k, name, san, issuer, issuer_key, from_s, to_s, ca);
  char pem[64], key[64];
  snprintf(pem, sizeof pem, "%s.pem", name);
  snprintf(key, sizeof key, "%s.key", name);
  pki_write_cert(x, pem);
  pki_write_key(k, key, NULL);
  if (cert_out)
    *cert_out = x;
  else
    X509_free(x);
  return k;
}

/* Makes the certificates (a cmocka setup); 0, or -1 when no directory
 * could be made. */
static int pki_make(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN); /* a close_notify to a client gone, as the server does */
  snprintf(pki_dir, sizeof pki_dir, "/tmp/pts_unit_tls_XXXXXX");
  if (!mkdtemp(pki_dir)) return -1;
  const long day = 86400;
  X509 *ca, *other;
  EVP_PKEY *ca_key = pki_issue("ca", NULL, NULL, NULL, -day, day, true, &ca);
  EVP_PKEY *other_key = pki_issue("other_ca", NULL, NULL, NULL, -day, day, true, &other);
  /* The server's certificate names 400 hosts: 12 KB, more than the
   * smallest socket buffer holds. */
  static char san[16384];
  size_t at = (size_t)snprintf(san, sizeof san, "DNS:localhost,IP:127.0.0.1");
  for (int i = 0; i < 400; i++)
    at += (size_t)snprintf(san + at, sizeof san - at, ",DNS:host%03d.example.com", i);
  EVP_PKEY_free(pki_issue("server", san, ca, ca_key, -day, day, false, NULL));
  EVP_PKEY_free(pki_issue("client", NULL, ca, ca_key, -day, day, false, NULL));
  EVP_PKEY_free(pki_issue("expired", NULL, ca, ca_key, -2 * day, -day, false, NULL));
  EVP_PKEY_free(pki_issue("stranger", NULL, other, other_key, -day, day, false, NULL));
  EVP_PKEY *spare = EVP_EC_gen("P-256");
  pki_write_key(spare, "spare.key", NULL);
  pki_write_key(spare, "locked.key", "secret");
  EVP_PKEY_free(spare);
  FILE *junk = fopen(pki_file("junk.pem"), "w");
  assert_non_null(junk);
  fputs("this is not a certificate\n", junk);
  fclose(junk);
  X509_free(ca);
  X509_free(other);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(other_key);
  return 0;
}

static int pki_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int pki_remove(void **state) {
  (void)state;
  nftw(pki_dir, pki_remove_one, 4, FTW_DEPTH | FTW_PHYS);
  return 0;
}

#endif
