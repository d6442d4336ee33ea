#ifndef STREAMRECV_CDTLS_H
#define STREAMRECV_CDTLS_H
// The WHIP ingest's OpenSSL 3: for DTLS-SRTP a self-signed identity, a DTLS 1.2 association over memory BIOs
// (the caller owns the UDP socket and moves datagrams in and out), and HMAC-SHA1 for STUN's MESSAGE-INTEGRITY;
// for the WHIP endpoint's HTTPS, a TLS server with the operator's certificate, also over memory BIOs.
// Nothing here is thread-safe per object: one association is used by one thread at a time. Every function that
// takes `error`/`error_capacity` writes a NUL-terminated reason there on failure (truncated to fit).
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// SHA-256 fingerprints, as in SDP's `a=fingerprint:sha-256`.
#define CDTLS_FINGERPRINT_SIZE 32
/// Largest datagram this layer takes or could produce: one DTLS record header (13) plus the largest record
/// payload TLS allows (2^14 + 2048). What it sends is one record per datagram, each at most CDTLS_MTU bytes.
#define CDTLS_DATAGRAM_CAPACITY (13 + 16384 + 2048)
/// The path MTU the handshake is cut to: 1200 is what browsers use, and fits any path that carries WebRTC.
#define CDTLS_MTU 1200
/// Room for the largest keying block (two keys and two salts of AES128_CM_SHA1_80).
#define CDTLS_SRTP_KEYING_CAPACITY 60

/// IANA DTLS-SRTP protection profile ids (RFC 5764, RFC 7714), as OpenSSL reports them.
enum {
    CDTLS_SRTP_AES128_CM_SHA1_80 = 0x0001,
    CDTLS_SRTP_AEAD_AES_128_GCM = 0x0007,
};

typedef enum {
    CDTLS_STATE_HANDSHAKING = 0,
    CDTLS_STATE_CONNECTED = 1,
    CDTLS_STATE_FAILED = 2,
    CDTLS_STATE_CLOSED = 3,
} cdtls_state;

/// Why an association failed; cdtls_association_error has the matching text.
typedef enum {
    CDTLS_FAILURE_NONE = 0,
    CDTLS_FAILURE_HANDSHAKE = 1,
    CDTLS_FAILURE_FINGERPRINT_MISMATCH = 2,
    CDTLS_FAILURE_NO_SRTP_PROFILE = 3,
    CDTLS_FAILURE_NO_PEER_CERTIFICATE = 4,
    CDTLS_FAILURE_TIMED_OUT = 5,
    CDTLS_FAILURE_PEER_ALERT = 6,
    CDTLS_FAILURE_INTERNAL = 7,
} cdtls_failure;

/// A certificate and its private key: ECDSA P-256, self-signed, CN "streamrecvd", random serial, valid from a day
/// ago for 30 days, signed with SHA-256. Immutable once generated.
typedef struct cdtls_identity cdtls_identity;

/// Returns a new identity the caller owns (free with cdtls_identity_free), or NULL with `error` filled.
cdtls_identity *cdtls_identity_generate(char *error, size_t error_capacity);
/// Writes the SHA-256 of the certificate's DER into `out`.
void cdtls_identity_fingerprint_sha256(const cdtls_identity *identity, uint8_t out[CDTLS_FINGERPRINT_SIZE]);
/// Frees the identity. Associations made from it hold their own references and stay valid. NULL is allowed.
void cdtls_identity_free(cdtls_identity *identity);

/// One DTLS 1.2 association with one peer. Datagrams go in through cdtls_association_feed and come out through
/// cdtls_association_next_datagram; the association never touches a socket or a clock other than OpenSSL's.
typedef struct cdtls_association cdtls_association;

/// A DTLS server (WHIP's `a=setup:passive`). It demands a client certificate and fails the handshake unless that
/// certificate's SHA-256 equals `expected_peer_fingerprint` (from the SDP offer) and an SRTP profile was agreed.
/// No cookie exchange: ICE has already proven the peer's address. Returns an association the caller owns (free
/// with cdtls_association_free), or NULL with `error` filled.
cdtls_association *cdtls_association_new(const cdtls_identity *identity,
                                         const uint8_t expected_peer_fingerprint[CDTLS_FINGERPRINT_SIZE],
                                         char *error, size_t error_capacity);
/// A DTLS client, for tests: `identity` may be NULL (sends no certificate); `srtp_profiles` is an OpenSSL profile
/// list such as "SRTP_AES128_CM_SHA1_80", or NULL to offer no use_srtp extension at all. Nothing is sent until
/// cdtls_association_connect.
cdtls_association *cdtls_association_new_client(const cdtls_identity *identity,
                                                const uint8_t expected_peer_fingerprint[CDTLS_FINGERPRINT_SIZE],
                                                const char *srtp_profiles, char *error, size_t error_capacity);
/// A client writes its ClientHello (then waiting in next_datagram) and starts its timer; a server does nothing.
cdtls_state cdtls_association_connect(cdtls_association *association);
/// Frees the association and everything it holds, including datagrams not yet taken. NULL is allowed.
void cdtls_association_free(cdtls_association *association);

/// Takes one received datagram (copied; the caller keeps `datagram`) and advances the handshake, or after it
/// answers retransmissions and notices the peer's close_notify. Records that do not parse are dropped, as DTLS
/// requires. Returns the state afterwards; once FAILED or CLOSED, datagrams are ignored.
cdtls_state cdtls_association_feed(cdtls_association *association, const uint8_t *datagram, size_t length);
/// Copies the next datagram to send into `out` and returns its length, or returns 0 when there is none. Each
/// datagram is one DTLS record of at most CDTLS_MTU bytes, as OpenSSL sends over a socket. If `capacity` is too
/// small, nothing is copied or consumed and the needed length is returned (so `capacity` 0 asks for the size).
size_t cdtls_association_next_datagram(cdtls_association *association, uint8_t *out, size_t capacity);

cdtls_state cdtls_association_state(const cdtls_association *association);
cdtls_failure cdtls_association_failure(const cdtls_association *association);
/// A short static text for the failure ("" while not failed), e.g. "no SRTP profile in common"; valid forever.
const char *cdtls_association_error(const cdtls_association *association);

/// Milliseconds until cdtls_association_handle_timeout should be called to retransmit our last flight, or -1
/// when no timer runs (connected, failed, or nothing sent yet).
int64_t cdtls_association_timeout_ms(const cdtls_association *association);
/// Retransmits the last flight if its timer expired (datagrams then wait in next_datagram); after too many
/// timeouts the association fails with CDTLS_FAILURE_TIMED_OUT. Returns the state afterwards.
cdtls_state cdtls_association_handle_timeout(cdtls_association *association);
/// Tests only: the first retransmission timeout (OpenSSL's 1 s by default); later ones double up to 60 s.
void cdtls_association_set_initial_timeout_ms(cdtls_association *association, uint32_t milliseconds);

/// Sends close_notify (datagrams wait in next_datagram) and moves to CLOSED. Harmless in any state.
void cdtls_association_close(cdtls_association *association);

/// Writes the SHA-256 of the peer's certificate; returns 0 when there is no peer certificate yet, 1 otherwise.
int cdtls_association_peer_fingerprint_sha256(const cdtls_association *association,
                                              uint8_t out[CDTLS_FINGERPRINT_SIZE]);
/// While CONNECTED: the SRTP master keys per RFC 5764 §4.2, laid out as client key, server key, client salt,
/// server salt (16+16+14+14 bytes for AES128_CM_SHA1_80, 16+16+12+12 for AEAD_AES_128_GCM). `*profile` gets the
/// CDTLS_SRTP_* id. Returns the number of bytes written, or 0 (not connected, or `capacity` too small).
size_t cdtls_association_srtp_keying(const cdtls_association *association, uint8_t *out, size_t capacity,
                                     int *profile);

/// HMAC-SHA1 (RFC 2104) through OpenSSL, for STUN's MESSAGE-INTEGRITY. Returns 1 on success, 0 on failure.
int cdtls_hmac_sha1(const uint8_t *key, size_t key_length, const uint8_t *data, size_t data_length,
                    uint8_t out[20]);

/// HTTPS: a TLS server context with the operator's certificate chain and key (PEM files). Immutable once made and
/// shared by every connection, from any thread (OpenSSL's SSL_CTX is safe to make connections from concurrently).
typedef struct cdtls_tls_server cdtls_tls_server;

/// Reads `certificate_path` (the server's certificate, then its chain) and `key_path` (an unencrypted key), checks
/// that they belong together, and allows TLS 1.2 and 1.3. Returns a context the caller owns (free with
/// cdtls_tls_server_free), or NULL with `error` filled.
cdtls_tls_server *cdtls_tls_server_new(const char *certificate_path, const char *key_path, char *error,
                                       size_t error_capacity);
/// Frees the context; connections made from it hold their own references and stay valid. NULL is allowed.
void cdtls_tls_server_free(cdtls_tls_server *server);
/// Seconds from now to the certificate's notAfter: negative once it has expired.
int64_t cdtls_tls_server_seconds_until_expiry(const cdtls_tls_server *server);
/// The certificate's subject as OpenSSL's one-line text, NUL-terminated in `out`; returns its length.
size_t cdtls_tls_server_subject(const cdtls_tls_server *server, char *out, size_t capacity);
/// 1 when the certificate names `host` (a DNS name, or an IP address in its subjectAltName), else 0.
int cdtls_tls_server_covers_host(const cdtls_tls_server *server, const char *host);

typedef enum {
    CDTLS_TLS_HANDSHAKING = 0,
    CDTLS_TLS_OPEN = 1,
    CDTLS_TLS_CLOSED = 2,  /// The peer's close_notify arrived, or we closed.
    CDTLS_TLS_FAILED = 3,
} cdtls_tls_state;

/// One TLS connection, server side. Bytes from the socket go in through cdtls_tls_connection_feed; what must go
/// back waits in cdtls_tls_connection_take_output. Not thread-safe: one event loop owns it.
typedef struct cdtls_tls_connection cdtls_tls_connection;

cdtls_tls_connection *cdtls_tls_connection_new(const cdtls_tls_server *server, char *error, size_t error_capacity);
void cdtls_tls_connection_free(cdtls_tls_connection *connection);
/// Takes bytes received (copied) and advances the handshake. Returns the state afterwards.
cdtls_tls_state cdtls_tls_connection_feed(cdtls_tls_connection *connection, const uint8_t *bytes, size_t length);
/// While OPEN: copies decrypted application bytes into `out`, returns how many (0: none until more is fed; the
/// state says whether the peer closed or the connection failed meanwhile).
size_t cdtls_tls_connection_read(cdtls_tls_connection *connection, uint8_t *out, size_t capacity);
/// While OPEN: encrypts all of `bytes` into records waiting in take_output. Returns 1, or 0 when not open.
int cdtls_tls_connection_write(cdtls_tls_connection *connection, const uint8_t *bytes, size_t length);
/// Copies up to `capacity` bytes that must be sent to the peer; returns how many (0: nothing waits).
size_t cdtls_tls_connection_take_output(cdtls_tls_connection *connection, uint8_t *out, size_t capacity);
/// Queues close_notify (when open; then in take_output) and moves to CLOSED.
void cdtls_tls_connection_close(cdtls_tls_connection *connection);
cdtls_tls_state cdtls_tls_connection_state(const cdtls_tls_connection *connection);
/// Why the connection failed ("" while it has not), e.g. "http request" or "no shared cipher"; valid forever.
const char *cdtls_tls_connection_error(const cdtls_tls_connection *connection);

#ifdef __cplusplus
}
#endif
#endif
