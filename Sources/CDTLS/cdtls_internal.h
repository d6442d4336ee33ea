#ifndef STREAMRECV_CDTLS_INTERNAL_H
#define STREAMRECV_CDTLS_INTERNAL_H
// Shared between the shim's files; not part of the module's interface.
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "cdtls.h"

struct cdtls_identity {
    X509 *certificate;
    EVP_PKEY *key;
};

/// Copies `reason`, and OpenSSL's last queued error if there is one, into `error`; clears the error queue.
void cdtls_set_error(char *error, size_t capacity, const char *reason);
/// SHA-256 over the DER of `certificate`; returns 1 on success.
int cdtls_certificate_fingerprint(const X509 *certificate, uint8_t out[CDTLS_FINGERPRINT_SIZE]);
#endif
