// The daemon's self-signed DTLS identity, and HMAC-SHA1. WebRTC does not use certificate chains: each side
// pins the other's certificate by the fingerprint carried in SDP, so a fresh self-signed certificate is all it takes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include "cdtls_internal.h"

void cdtls_set_error(char *error, size_t capacity, const char *reason) {
    unsigned long code = ERR_peek_last_error();
    if (error != NULL && capacity > 0) {
        if (code != 0) {
            char detail[256];
            ERR_error_string_n(code, detail, sizeof detail);
            snprintf(error, capacity, "%s: %s", reason, detail);
        } else {
            snprintf(error, capacity, "%s", reason);
        }
    }
    ERR_clear_error();
}

int cdtls_certificate_fingerprint(const X509 *certificate, uint8_t out[CDTLS_FINGERPRINT_SIZE]) {
    unsigned int length = 0;
    return X509_digest(certificate, EVP_sha256(), out, &length) == 1 && length == CDTLS_FINGERPRINT_SIZE;
}

/// A positive random 64-bit serial: every restart makes a certificate with the same issuer name, and an
/// issuer-and-serial pair is meant to name one certificate.
static int set_random_serial(X509 *certificate) {
    BIGNUM *number = BN_new();
    int ok = number != NULL && BN_rand(number, 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1
        && BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate)) != NULL;
    BN_free(number);
    return ok;
}

/// Fills in and signs `certificate` for `key`: X.509 v3, CN "streamrecvd" as subject and issuer, valid from a day
/// ago (clocks of peers drift) for 30 days (WebRTC certificates are short-lived by design).
static int build_certificate(X509 *certificate, EVP_PKEY *key) {
    X509_NAME *name = X509_get_subject_name(certificate);
    return X509_set_version(certificate, X509_VERSION_3) == 1
        && set_random_serial(certificate)
        && X509_gmtime_adj(X509_getm_notBefore(certificate), -24L * 60 * 60) != NULL
        && X509_gmtime_adj(X509_getm_notAfter(certificate), 30L * 24 * 60 * 60) != NULL
        && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"streamrecvd", -1, -1, 0) == 1
        && X509_set_issuer_name(certificate, name) == 1
        && X509_set_pubkey(certificate, key) == 1
        && X509_sign(certificate, key, EVP_sha256()) > 0;
}

cdtls_identity *cdtls_identity_generate(char *error, size_t error_capacity) {
    ERR_clear_error();
    cdtls_identity *identity = calloc(1, sizeof *identity);
    if (identity == NULL) {
        cdtls_set_error(error, error_capacity, "out of memory");
        return NULL;
    }
    identity->key = EVP_EC_gen("P-256");
    identity->certificate = X509_new();
    if (identity->key == NULL || identity->certificate == NULL
        || !build_certificate(identity->certificate, identity->key)) {
        cdtls_set_error(error, error_capacity, "cannot generate the DTLS certificate");
        cdtls_identity_free(identity);
        return NULL;
    }
    return identity;
}

void cdtls_identity_fingerprint_sha256(const cdtls_identity *identity, uint8_t out[CDTLS_FINGERPRINT_SIZE]) {
    if (!cdtls_certificate_fingerprint(identity->certificate, out)) {
        memset(out, 0, CDTLS_FINGERPRINT_SIZE);
    }
}

void cdtls_identity_free(cdtls_identity *identity) {
    if (identity == NULL) {
        return;
    }
    X509_free(identity->certificate);
    EVP_PKEY_free(identity->key);
    free(identity);
}

int cdtls_hmac_sha1(const uint8_t *key, size_t key_length, const uint8_t *data, size_t data_length,
                    uint8_t out[20]) {
    unsigned int length = 0;
    // HMAC() rejects a NULL key even when its length is 0; STUN never has an empty key, tests might.
    static const uint8_t empty = 0;
    if (key_length > INT32_MAX) {
        return 0;
    }
    return HMAC(EVP_sha1(), key_length > 0 ? key : &empty, (int)key_length, data_length > 0 ? data : &empty,
                data_length, out, &length) != NULL && length == 20;
}
