// A DTLS 1.2 association over two memory BIOs: the caller's UDP socket feeds `incoming` one datagram at a time
// and sends what `outgoing` holds, one DTLS record per datagram. The peer is trusted only by the
// SHA-256 fingerprint of its self-signed certificate, compared while OpenSSL verifies it, so a wrong certificate
// fails the handshake with an alert instead of completing it.
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include "cdtls_internal.h"

struct cdtls_association {
    SSL_CTX *context;
    SSL *ssl;           /// Owns both BIOs below (SSL_set_bio).
    BIO *incoming;
    BIO *outgoing;
    cdtls_state state;
    cdtls_failure failure;
    const char *error;  /// Static text: a literal, or OpenSSL's reason table.
    unsigned int initial_timeout_us;
    uint8_t expected_peer_fingerprint[CDTLS_FINGERPRINT_SIZE];
};

enum { record_header_length = 13, first_timeout_us = 1000000, longest_timeout_us = 60000000 };

// Our certificate is ECDSA, so only ECDHE-ECDSA suites can be chosen; AEAD first, CBC for older stacks.
static const char cipher_list[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                                  "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA";
// The server's preference order wins in OpenSSL: AES-GCM (RFC 7714) before AES-CM with HMAC-SHA1-80 (RFC 5764).
static const char server_srtp_profiles[] = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80";

static cdtls_state fail(cdtls_association *association, cdtls_failure failure, const char *reason) {
    if (association->state == CDTLS_STATE_HANDSHAKING || association->state == CDTLS_STATE_CONNECTED) {
        association->state = CDTLS_STATE_FAILED;
        association->failure = failure;
        association->error = reason;
    }
    return association->state;
}

/// Names what OpenSSL queued when a call failed; a failure our verify callback recorded already wins (fail()
/// keeps the first reason).
static cdtls_state fail_from_queue(cdtls_association *association) {
    unsigned long code = ERR_peek_last_error();
    int reason = ERR_GET_REASON(code);
    const char *text = code != 0 ? ERR_reason_error_string(code) : NULL;
    cdtls_state state;
    if (ERR_GET_LIB(code) == ERR_LIB_SSL && reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
        state = fail(association, CDTLS_FAILURE_NO_PEER_CERTIFICATE, "peer sent no certificate");
    } else if (ERR_GET_LIB(code) == ERR_LIB_SSL && reason == SSL_R_READ_TIMEOUT_EXPIRED) {
        state = fail(association, CDTLS_FAILURE_TIMED_OUT, "handshake timed out");
    } else if (ERR_GET_LIB(code) == ERR_LIB_SSL && reason >= SSL_AD_REASON_OFFSET
               && reason < SSL_AD_REASON_OFFSET + 256) {
        // Reasons past SSL_AD_REASON_OFFSET are alerts the peer sent ("sslv3 alert handshake failure").
        state = fail(association, CDTLS_FAILURE_PEER_ALERT, text != NULL ? text : "peer sent an alert");
    } else {
        state = fail(association, CDTLS_FAILURE_HANDSHAKE, text != NULL ? text : "handshake failure");
    }
    ERR_clear_error();
    return state;
}

/// Certificates here are self-signed, so OpenSSL's chain check always fails (`preverify_ok` 0) and is ignored:
/// the trust is the fingerprint from SDP. A server has settled the SRTP profile before the client's certificate
/// arrives, so refusing here also turns "no profile in common" into a handshake alert. (A client, like a browser,
/// checks the profile once the handshake is done: finish_handshake.)
static int verify_peer(int preverify_ok, X509_STORE_CTX *store) {
    (void)preverify_ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    cdtls_association *association = ssl != NULL ? SSL_get_app_data(ssl) : NULL;
    X509 *leaf = X509_STORE_CTX_get0_cert(store);
    uint8_t fingerprint[CDTLS_FINGERPRINT_SIZE];
    if (association == NULL) {
        return 0;
    }
    if (leaf == NULL || !cdtls_certificate_fingerprint(leaf, fingerprint)
        || CRYPTO_memcmp(fingerprint, association->expected_peer_fingerprint, CDTLS_FINGERPRINT_SIZE) != 0) {
        fail(association, CDTLS_FAILURE_FINGERPRINT_MISMATCH, "certificate fingerprint does not match the SDP");
    } else if (SSL_is_server(ssl) && SSL_get_selected_srtp_profile(ssl) == NULL) {
        fail(association, CDTLS_FAILURE_NO_SRTP_PROFILE, "no SRTP profile in common");
    } else {
        return 1;
    }
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);  // sent as a handshake_failure alert
    return 0;
}

/// OpenSSL's own schedule (1 s, doubling, at most 60 s) with a first step tests can shorten.
static unsigned int next_timeout_us(SSL *ssl, unsigned int previous_us) {
    const cdtls_association *association = SSL_get_app_data(ssl);
    if (previous_us == 0) {
        return association->initial_timeout_us;
    }
    return previous_us >= longest_timeout_us / 2 ? longest_timeout_us : previous_us * 2;
}

static SSL_CTX *new_context(const SSL_METHOD *method, const cdtls_identity *identity, const char *srtp_profiles) {
    SSL_CTX *context = SSL_CTX_new(method);
    if (context == NULL) {
        return NULL;
    }
    // SSL_CTX_set_tlsext_use_srtp returns 0 on success.
    int ok = SSL_CTX_set_min_proto_version(context, DTLS1_2_VERSION) == 1
        && SSL_CTX_set_max_proto_version(context, DTLS1_2_VERSION) == 1
        && SSL_CTX_set_cipher_list(context, cipher_list) == 1
        && (srtp_profiles == NULL || SSL_CTX_set_tlsext_use_srtp(context, srtp_profiles) == 0)
        && (identity == NULL
            || (SSL_CTX_use_certificate(context, identity->certificate) == 1
                && SSL_CTX_use_PrivateKey(context, identity->key) == 1));
    if (!ok) {
        SSL_CTX_free(context);
        return NULL;
    }
    // No resumption (a resumed session skips the certificate, and with it the fingerprint check), no
    // renegotiation, and no MTU queries: a memory BIO has no path MTU to ask.
    SSL_CTX_set_options(context, SSL_OP_NO_QUERY_MTU | SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_peer);
    return context;
}

/// Wires an SSL object of `context` (which the association then owns) to two memory BIOs.
static int attach_ssl(cdtls_association *association, SSL_CTX *context) {
    association->context = context;
    association->ssl = SSL_new(context);
    if (association->ssl == NULL) {
        return 0;
    }
    BIO *incoming = BIO_new(BIO_s_mem());
    BIO *outgoing = BIO_new(BIO_s_mem());
    if (incoming == NULL || outgoing == NULL) {
        BIO_free(incoming);
        BIO_free(outgoing);
        return 0;
    }
    // An empty memory BIO must read as "try again", not as end of file.
    BIO_set_mem_eof_return(incoming, -1);
    BIO_set_mem_eof_return(outgoing, -1);
    SSL_set_bio(association->ssl, incoming, outgoing);
    association->incoming = incoming;
    association->outgoing = outgoing;
    SSL_set_app_data(association->ssl, association);
    DTLS_set_timer_cb(association->ssl, next_timeout_us);
    return SSL_set_mtu(association->ssl, CDTLS_MTU) > 0;
}

static cdtls_association *new_association(const SSL_METHOD *method, const cdtls_identity *identity,
                                          const uint8_t expected_peer_fingerprint[CDTLS_FINGERPRINT_SIZE],
                                          const char *srtp_profiles, char *error, size_t error_capacity) {
    ERR_clear_error();
    cdtls_association *association = calloc(1, sizeof *association);
    if (association == NULL) {
        cdtls_set_error(error, error_capacity, "out of memory");
        return NULL;
    }
    association->state = CDTLS_STATE_HANDSHAKING;
    association->error = "";
    association->initial_timeout_us = first_timeout_us;
    memcpy(association->expected_peer_fingerprint, expected_peer_fingerprint, CDTLS_FINGERPRINT_SIZE);
    SSL_CTX *context = new_context(method, identity, srtp_profiles);
    if (context == NULL || !attach_ssl(association, context)) {  // attach_ssl makes the association own `context`
        cdtls_set_error(error, error_capacity, "cannot set up DTLS");
        cdtls_association_free(association);
        return NULL;
    }
    return association;
}

/// Checks again, once OpenSSL calls the handshake done, what verify_peer checked while it ran.
static cdtls_state finish_handshake(cdtls_association *association) {
    X509 *peer = SSL_get0_peer_certificate(association->ssl);
    uint8_t fingerprint[CDTLS_FINGERPRINT_SIZE];
    if (peer == NULL) {
        fail(association, CDTLS_FAILURE_NO_PEER_CERTIFICATE, "peer sent no certificate");
    } else if (!cdtls_certificate_fingerprint(peer, fingerprint)
               || CRYPTO_memcmp(fingerprint, association->expected_peer_fingerprint, CDTLS_FINGERPRINT_SIZE) != 0) {
        fail(association, CDTLS_FAILURE_FINGERPRINT_MISMATCH, "certificate fingerprint does not match the SDP");
    } else if (SSL_get_selected_srtp_profile(association->ssl) == NULL) {
        fail(association, CDTLS_FAILURE_NO_SRTP_PROFILE, "no SRTP profile in common");
    } else {
        association->state = CDTLS_STATE_CONNECTED;
        return association->state;
    }
    // The peer thinks it is connected: close_notify at least tells it to stop.
    SSL_shutdown(association->ssl);
    ERR_clear_error();
    return association->state;
}

/// After the handshake: records are retransmitted handshake messages (OpenSSL answers them), alerts, or
/// application data, which this ingest has no use for (no data channels) and drops.
static cdtls_state read_records(cdtls_association *association) {
    uint8_t discarded[2048];
    for (;;) {
        int count = SSL_read(association->ssl, discarded, sizeof discarded);
        if (count > 0) {
            continue;
        }
        switch (SSL_get_error(association->ssl, count)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
            return association->state;
        case SSL_ERROR_ZERO_RETURN:
            SSL_shutdown(association->ssl);  // answers close_notify with ours
            ERR_clear_error();
            association->state = CDTLS_STATE_CLOSED;
            return association->state;
        default:
            return fail_from_queue(association);
        }
    }
}

static cdtls_state advance_handshake(cdtls_association *association) {
    int result = SSL_do_handshake(association->ssl);
    if (result == 1) {
        // Records packed behind the peer's Finished in the same datagram are read at once.
        return finish_handshake(association) == CDTLS_STATE_CONNECTED ? read_records(association)
                                                                       : association->state;
    }
    switch (SSL_get_error(association->ssl, result)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return association->state;
    case SSL_ERROR_ZERO_RETURN:
        association->state = CDTLS_STATE_CLOSED;
        return association->state;
    default:
        return fail_from_queue(association);
    }
}

cdtls_association *cdtls_association_new(const cdtls_identity *identity,
                                         const uint8_t expected_peer_fingerprint[CDTLS_FINGERPRINT_SIZE],
                                         char *error, size_t error_capacity) {
    cdtls_association *association = new_association(DTLS_server_method(), identity, expected_peer_fingerprint,
                                                      server_srtp_profiles, error, error_capacity);
    if (association != NULL) {
        SSL_set_accept_state(association->ssl);
    }
    return association;
}

cdtls_association *cdtls_association_new_client(const cdtls_identity *identity,
                                                const uint8_t expected_peer_fingerprint[CDTLS_FINGERPRINT_SIZE],
                                                const char *srtp_profiles, char *error, size_t error_capacity) {
    cdtls_association *association = new_association(DTLS_client_method(), identity, expected_peer_fingerprint,
                                                      srtp_profiles, error, error_capacity);
    if (association != NULL) {
        SSL_set_connect_state(association->ssl);
    }
    return association;
}

cdtls_state cdtls_association_connect(cdtls_association *association) {
    if (association->state != CDTLS_STATE_HANDSHAKING || SSL_is_server(association->ssl)) {
        return association->state;
    }
    ERR_clear_error();
    cdtls_state state = advance_handshake(association);
    ERR_clear_error();
    return state;
}

void cdtls_association_free(cdtls_association *association) {
    if (association == NULL) {
        return;
    }
    SSL_free(association->ssl);
    SSL_CTX_free(association->context);
    free(association);
}

cdtls_state cdtls_association_feed(cdtls_association *association, const uint8_t *datagram, size_t length) {
    if (association->state == CDTLS_STATE_FAILED || association->state == CDTLS_STATE_CLOSED || length == 0
        || length > CDTLS_DATAGRAM_CAPACITY) {
        return association->state;
    }
    ERR_clear_error();
    if (BIO_write(association->incoming, datagram, (int)length) != (int)length) {
        return fail(association, CDTLS_FAILURE_INTERNAL, "out of memory");
    }
    cdtls_state state = association->state == CDTLS_STATE_HANDSHAKING ? advance_handshake(association)
                                                                      : read_records(association);
    // Bytes of a malformed datagram that OpenSSL left unread must not run into the next datagram.
    if (BIO_ctrl_pending(association->incoming) > 0) {
        (void)BIO_reset(association->incoming);
    }
    ERR_clear_error();
    return state;
}

/// How many bytes from the front of `data` form the next datagram: one whole record, as OpenSSL's own datagram
/// BIO sends them (handshake messages are already cut to the MTU). Packing several records would save packets,
/// but the memory BIO does not say where a flight ends, and OpenSSL drops the rest of a datagram after a stale
/// retransmitted message: a retransmission packed in front of the next flight would lose that flight.
static size_t next_datagram_length(const uint8_t *data, size_t available) {
    if (available < record_header_length) {
        return available;  // OpenSSL writes whole records; anything else goes out as it is
    }
    size_t record = record_header_length + ((size_t)data[11] << 8 | data[12]);
    return record <= available ? record : available;
}

size_t cdtls_association_next_datagram(cdtls_association *association, uint8_t *out, size_t capacity) {
    char *data = NULL;
    long available = BIO_get_mem_data(association->outgoing, &data);
    if (available <= 0 || data == NULL) {
        return 0;
    }
    size_t length = next_datagram_length((const uint8_t *)data, (size_t)available);
    if (length > capacity) {
        return length;
    }
    return BIO_read(association->outgoing, out, (int)length) == (int)length ? length : 0;
}

cdtls_state cdtls_association_state(const cdtls_association *association) {
    return association->state;
}

cdtls_failure cdtls_association_failure(const cdtls_association *association) {
    return association->failure;
}

const char *cdtls_association_error(const cdtls_association *association) {
    return association->error;
}

int64_t cdtls_association_timeout_ms(const cdtls_association *association) {
    struct timeval remaining = { 0, 0 };
    if (association->state != CDTLS_STATE_HANDSHAKING || DTLSv1_get_timeout(association->ssl, &remaining) != 1) {
        return -1;
    }
    return (int64_t)remaining.tv_sec * 1000 + (remaining.tv_usec + 999) / 1000;
}

cdtls_state cdtls_association_handle_timeout(cdtls_association *association) {
    if (association->state != CDTLS_STATE_HANDSHAKING) {
        return association->state;
    }
    ERR_clear_error();
    if (DTLSv1_handle_timeout(association->ssl) < 0) {
        return fail_from_queue(association);
    }
    return association->state;
}

void cdtls_association_set_initial_timeout_ms(cdtls_association *association, uint32_t milliseconds) {
    association->initial_timeout_us = milliseconds >= UINT32_MAX / 1000 ? longest_timeout_us : milliseconds * 1000;
}

void cdtls_association_close(cdtls_association *association) {
    if (association->state == CDTLS_STATE_CONNECTED) {
        SSL_shutdown(association->ssl);
    }
    if (association->state == CDTLS_STATE_CONNECTED || association->state == CDTLS_STATE_HANDSHAKING) {
        association->state = CDTLS_STATE_CLOSED;
    }
    ERR_clear_error();
}

int cdtls_association_peer_fingerprint_sha256(const cdtls_association *association,
                                              uint8_t out[CDTLS_FINGERPRINT_SIZE]) {
    X509 *peer = SSL_get0_peer_certificate(association->ssl);
    return peer != NULL && cdtls_certificate_fingerprint(peer, out);
}

size_t cdtls_association_srtp_keying(const cdtls_association *association, uint8_t *out, size_t capacity,
                                     int *profile) {
    static const char label[] = "EXTRACTOR-dtls_srtp";  // RFC 5764 §4.2
    SRTP_PROTECTION_PROFILE *selected = SSL_get_selected_srtp_profile(association->ssl);
    if (association->state != CDTLS_STATE_CONNECTED || selected == NULL) {
        return 0;
    }
    size_t salt_length = selected->id == CDTLS_SRTP_AES128_CM_SHA1_80 ? 14
                       : selected->id == CDTLS_SRTP_AEAD_AES_128_GCM ? 12 : 0;
    size_t total = 2 * (16 + salt_length);
    if (salt_length == 0 || capacity < total) {
        return 0;
    }
    int ok = SSL_export_keying_material(association->ssl, out, total, label, sizeof label - 1, NULL, 0, 0) == 1;
    ERR_clear_error();
    if (!ok) {
        return 0;
    }
    *profile = (int)selected->id;
    return total;
}
