// TLS for the WHIP endpoint (HTTPS), on the same OpenSSL as DTLS: the operator's certificate chain and key, and
// one server connection per TCP connection over two memory BIOs (the caller's event loop owns the socket). One
// TLS library in the daemon, the system's, which Debian keeps patched.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "cdtls_internal.h"

struct cdtls_tls_server {
    SSL_CTX *context;
};

struct cdtls_tls_connection {
    SSL *ssl;           /// Owns both BIOs below (SSL_set_bio).
    BIO *incoming;
    BIO *outgoing;
    cdtls_tls_state state;
    const char *error;  /// Static text: a literal, or OpenSSL's reason table.
};

/// An encrypted key would make OpenSSL ask for its passphrase on the terminal; a daemon has none to answer.
static int no_passphrase(char *buffer, int size, int rwflag, void *userdata) {
    (void)buffer, (void)size, (void)rwflag, (void)userdata;
    return 0;
}

cdtls_tls_server *cdtls_tls_server_new(const char *certificate_path, const char *key_path, char *error,
                                       size_t error_capacity) {
    ERR_clear_error();
    cdtls_tls_server *server = calloc(1, sizeof *server);
    SSL_CTX *context = server != NULL ? SSL_CTX_new(TLS_server_method()) : NULL;
    if (context == NULL) {
        free(server);
        cdtls_set_error(error, error_capacity, "cannot set up TLS");
        return NULL;
    }
    SSL_CTX_set_default_passwd_cb(context, no_passphrase);
    const char *failure = NULL;
    if (SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) != 1) {
        failure = "cannot require TLS 1.2";
    } else if (SSL_CTX_use_certificate_chain_file(context, certificate_path) != 1) {
        failure = "cannot read the certificate (PEM, the server's first, then its chain)";
    } else if (SSL_CTX_use_PrivateKey_file(context, key_path, SSL_FILETYPE_PEM) != 1) {
        // OpenSSL checks the pair as it takes the key: say which of the two went wrong.
        unsigned long code = ERR_peek_last_error();
        failure = ERR_GET_LIB(code) == ERR_LIB_X509 && ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH
            ? "the private key does not belong to the certificate"
            : "cannot read the private key (PEM, not encrypted)";
    } else if (SSL_CTX_check_private_key(context) != 1) {
        failure = "the private key does not belong to the certificate";
    }
    if (failure != NULL) {
        cdtls_set_error(error, error_capacity, failure);
        SSL_CTX_free(context);
        free(server);
        return NULL;
    }
    // No renegotiation. Resumption through the server's session cache, not tickets: a ticket key would live until
    // the next reload and decrypt every TLS 1.2 ticket issued under it.
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
    SSL_CTX_set_mode(context, SSL_MODE_RELEASE_BUFFERS);
    server->context = context;
    return server;
}

void cdtls_tls_server_free(cdtls_tls_server *server) {
    if (server != NULL) {
        SSL_CTX_free(server->context);
        free(server);
    }
}

int64_t cdtls_tls_server_seconds_until_expiry(const cdtls_tls_server *server) {
    X509 *certificate = SSL_CTX_get0_certificate(server->context);
    int days = 0, seconds = 0;
    if (certificate == NULL || ASN1_TIME_diff(&days, &seconds, NULL, X509_get0_notAfter(certificate)) != 1) {
        return 0;
    }
    return (int64_t)days * 86400 + seconds;
}

size_t cdtls_tls_server_subject(const cdtls_tls_server *server, char *out, size_t capacity) {
    X509 *certificate = SSL_CTX_get0_certificate(server->context);
    if (certificate == NULL || capacity == 0) {
        return 0;
    }
    out[0] = '\0';
    if (X509_NAME_oneline(X509_get_subject_name(certificate), out, capacity > INT_MAX ? INT_MAX : (int)capacity) == NULL) {
        out[0] = '\0';
    }
    return strlen(out);
}

int cdtls_tls_server_covers_host(const cdtls_tls_server *server, const char *host) {
    X509 *certificate = SSL_CTX_get0_certificate(server->context);
    if (certificate == NULL) {
        return 0;
    }
    /* The subject's CN is no name a browser checks (only subjectAltName counts): it covers nothing here either. */
    return X509_check_host(certificate, host, 0, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, NULL) == 1 ||
           X509_check_ip_asc(certificate, host, 0) == 1;
}

cdtls_tls_connection *cdtls_tls_connection_new(const cdtls_tls_server *server, char *error, size_t error_capacity) {
    ERR_clear_error();
    cdtls_tls_connection *connection = calloc(1, sizeof *connection);
    SSL *ssl = connection != NULL ? SSL_new(server->context) : NULL;
    BIO *incoming = ssl != NULL ? BIO_new(BIO_s_mem()) : NULL;
    BIO *outgoing = incoming != NULL ? BIO_new(BIO_s_mem()) : NULL;
    if (outgoing == NULL) {
        BIO_free(incoming);
        SSL_free(ssl);
        free(connection);
        cdtls_set_error(error, error_capacity, "cannot set up a TLS connection");
        return NULL;
    }
    // An empty memory BIO reads as "retry" rather than end of file: more bytes may come from the socket.
    BIO_set_mem_eof_return(incoming, -1);
    SSL_set_bio(ssl, incoming, outgoing);
    SSL_set_accept_state(ssl);
    connection->ssl = ssl;
    connection->incoming = incoming;
    connection->outgoing = outgoing;
    connection->state = CDTLS_TLS_HANDSHAKING;
    connection->error = "";
    return connection;
}

void cdtls_tls_connection_free(cdtls_tls_connection *connection) {
    if (connection != NULL) {
        SSL_free(connection->ssl);
        free(connection);
    }
}

static cdtls_tls_state fail(cdtls_tls_connection *connection, const char *fallback) {
    unsigned long code = ERR_peek_last_error();
    const char *text = code != 0 ? ERR_reason_error_string(code) : NULL;
    if (connection->state == CDTLS_TLS_HANDSHAKING || connection->state == CDTLS_TLS_OPEN) {
        connection->state = CDTLS_TLS_FAILED;
        connection->error = text != NULL ? text : fallback;
    }
    ERR_clear_error();
    return connection->state;
}

/// What a call's -1 means: wait for more bytes, the peer's close_notify, or a failure.
static cdtls_tls_state settle(cdtls_tls_connection *connection, int result, const char *fallback) {
    switch (SSL_get_error(connection->ssl, result)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        ERR_clear_error();
        return connection->state;
    case SSL_ERROR_ZERO_RETURN:
        connection->state = CDTLS_TLS_CLOSED;
        ERR_clear_error();
        return connection->state;
    default:
        return fail(connection, fallback);
    }
}

cdtls_tls_state cdtls_tls_connection_feed(cdtls_tls_connection *connection, const uint8_t *bytes, size_t length) {
    if (connection->state != CDTLS_TLS_HANDSHAKING && connection->state != CDTLS_TLS_OPEN) {
        return connection->state;
    }
    ERR_clear_error();
    if (length > INT_MAX) {
        return fail(connection, "a read larger than OpenSSL takes");
    }
    if (length > 0 && BIO_write(connection->incoming, bytes, (int)length) != (int)length) {
        return fail(connection, "out of memory");
    }
    if (connection->state == CDTLS_TLS_HANDSHAKING) {
        int result = SSL_do_handshake(connection->ssl);
        if (result == 1) {
            connection->state = CDTLS_TLS_OPEN;
        } else {
            return settle(connection, result, "handshake failure");
        }
    }
    return connection->state;
}

size_t cdtls_tls_connection_read(cdtls_tls_connection *connection, uint8_t *out, size_t capacity) {
    if (connection->state != CDTLS_TLS_OPEN || capacity == 0) {
        return 0;
    }
    ERR_clear_error();
    size_t count = 0;
    int result = SSL_read_ex(connection->ssl, out, capacity, &count);
    if (result != 1) {
        settle(connection, result, "cannot read a record");
        return 0;
    }
    return count;
}

int cdtls_tls_connection_write(cdtls_tls_connection *connection, const uint8_t *bytes, size_t length) {
    if (connection->state != CDTLS_TLS_OPEN) {
        return 0;
    }
    ERR_clear_error();
    size_t written = 0;
    // Memory BIOs never refuse a write, so a whole buffer is always taken.
    if (length > 0 && (SSL_write_ex(connection->ssl, bytes, length, &written) != 1 || written != length)) {
        fail(connection, "cannot write a record");
        return 0;
    }
    return 1;
}

size_t cdtls_tls_connection_take_output(cdtls_tls_connection *connection, uint8_t *out, size_t capacity) {
    int pending = BIO_pending(connection->outgoing);
    if (pending <= 0 || capacity == 0) {
        return 0;
    }
    int count = BIO_read(connection->outgoing, out, (int)(capacity < (size_t)pending ? capacity : (size_t)pending));
    return count > 0 ? (size_t)count : 0;
}

void cdtls_tls_connection_close(cdtls_tls_connection *connection) {
    if (connection->state == CDTLS_TLS_OPEN) {
        SSL_shutdown(connection->ssl);
        ERR_clear_error();
    }
    if (connection->state == CDTLS_TLS_HANDSHAKING || connection->state == CDTLS_TLS_OPEN) {
        connection->state = CDTLS_TLS_CLOSED;
    }
}

cdtls_tls_state cdtls_tls_connection_state(const cdtls_tls_connection *connection) { return connection->state; }

const char *cdtls_tls_connection_error(const cdtls_tls_connection *connection) { return connection->error; }
