/*
 * pki_fixture.h: a throw-away PKI for the C TLS tests, made with the openssl
 * command at run time (nothing secret is checked in), in a fresh directory
 * under /tmp. The same layout as tests/interop/lib/pki.mjs:
 *   ca.pem / ca.key          the test CA
 *   server.pem / server.key  localhost + 127.0.0.1, signed by the CA
 *   client.pem / client.key  CN=good-client, signed by the CA (mutual TLS)
 *   other-ca.pem             an unrelated CA
 *   other.pem / other.key    CN=stranger, signed by the unrelated CA
 */
#ifndef PL_TESTS_PKI_FIXTURE_H
#define PL_TESTS_PKI_FIXTURE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pki {
    char dir[64];
    char path[8][160]; /* scratch for pki_file */
    unsigned next;
} pki;

/* The path of `name` in the PKI directory (valid for the next 7 calls). */
static __attribute__((unused)) const char *pki_file(pki *p, const char *name)
{
    char *out = p->path[p->next++ % 8];
    size_t d = strlen(p->dir), n = strlen(name);
    if (d + 1 + n >= sizeof(p->path[0]))
        n = sizeof(p->path[0]) - d - 2; /* never with the names used here */
    memcpy(out, p->dir, d);
    out[d] = '/';
    memcpy(out + d + 1, name, n);
    out[d + 1 + n] = 0;
    return out;
}

/* Makes the PKI; false when openssl failed (its output is on stderr). */
static __attribute__((unused)) bool pki_make(pki *p)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->dir, sizeof(p->dir), "/tmp/proflink-pki-XXXXXX");
    if (!mkdtemp(p->dir))
        return false;
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd %s && set -e\n"
             "EC='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
             "ca() { openssl req -x509 $EC -keyout $1.key -out $1.pem -days 3 -subj \"/CN=$2\" "
             "-addext basicConstraints=critical,CA:TRUE "
             "-addext keyUsage=critical,keyCertSign,cRLSign; }\n"
             "leaf() { openssl req $EC -keyout $1.key -out $1.csr -subj \"/CN=$2\"\n"
             "  printf \"$4\" > $1.ext\n"
             "  openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3.key -CAcreateserial "
             "-out $1.pem -days 3 -extfile $1.ext; }\n"
             "ca ca 'proflink test CA'\n"
             "ca other-ca 'unrelated CA'\n"
             "leaf server localhost ca "
             "'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n'\n"
             "leaf client good-client ca 'extendedKeyUsage=clientAuth\\n'\n"
             "leaf other stranger other-ca 'extendedKeyUsage=clientAuth\\n'\n",
             p->dir);
    char quiet[sizeof(cmd) + 256];
    snprintf(quiet, sizeof(quiet),
             "( %s ) >/dev/null 2>%s/openssl.log || { cat %s/openssl.log >&2; "
             "exit 1; }",
             cmd, p->dir, p->dir);
    return system(quiet) == 0;
}

/* pki_make, saying on stderr when it failed. */
static __attribute__((unused)) bool pki_ready(pki *p)
{
    if (pki_make(p))
        return true;
    fprintf(stderr, "openssl could not make the test certificates\n");
    return false;
}

static __attribute__((unused)) void pki_remove(pki *p)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", p->dir);
    if (p->dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", p->dir);
}

#endif
