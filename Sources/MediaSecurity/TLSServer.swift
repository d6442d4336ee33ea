import CDTLS
import Synchronization

/// The WHIP endpoint's HTTPS identity: the operator's certificate chain and private key (PEM files), read and
/// checked against each other once, then shared by every connection. Reading the files again (a reload after a
/// renewal) makes a new value; connections already open keep the one they started with.
public final class TLSServerCertificate: Sendable {
    /// The owned `cdtls_tls_server`, freed in deinit. OpenSSL allows connections to be made from one context on
    /// several threads; the lock is there because the compiler cannot know that.
    private let handle: Mutex<OpaquePointer>
    /// The certificate's subject, e.g. "/CN=receiver.example".
    public let subject: String

    /// Fails with OpenSSL's reason when a file is missing, unreadable, not PEM, an encrypted key, or when the key
    /// is not the certificate's.
    public init(certificatePath: String, keyPath: String) throws(TLSSetupError) {
        let made = DTLSSetupError.attempt { error, capacity in cdtls_tls_server_new(certificatePath, keyPath, error, capacity) }
        guard case .success(let server) = made else {
            if case .failure(let failure) = made { throw TLSSetupError(description: failure.description) }
            throw TLSSetupError(description: "cannot set up TLS")
        }
        subject = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { buffer in
            let length = cdtls_tls_server_subject(server, buffer.baseAddress, buffer.count)
            return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        handle = Mutex(server)
    }

    deinit {
        handle.withLock { cdtls_tls_server_free($0) }
    }

    /// Until the certificate's notAfter; negative once it has passed.
    public var secondsUntilExpiry: Int64 {
        handle.withLock { cdtls_tls_server_seconds_until_expiry($0) }
    }

    /// Whether the certificate names `host` (DNS name or IP address): a browser refuses one that does not.
    public func covers(host: String) -> Bool {
        handle.withLock { cdtls_tls_server_covers_host($0, host) == 1 }
    }

    /// A new server connection, owned by the caller's event loop.
    public func makeConnection() throws(TLSSetupError) -> TLSServerConnection {
        let made = handle.withLock { server in
            DTLSSetupError.attempt { error, capacity in cdtls_tls_connection_new(server, error, capacity) }
        }
        switch made {
        case .success(let connection): return TLSServerConnection(handle: connection)
        case .failure(let failure): throw TLSSetupError(description: failure.description)
        }
    }
}

/// Reading the certificate or key failed, or OpenSSL could not make a context.
public struct TLSSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// One HTTPS connection, server side, over bytes the caller moves: everything from the socket to `receive`,
/// then send `takeOutput()` and hand `takePlaintext()` to HTTP; replies go through `send` and out the same way.
///
/// Not Sendable: an OpenSSL connection is used by one thread; it lives on its channel's event loop.
public final class TLSServerConnection {
    public enum State: Equatable, Sendable {
        case handshaking
        case open
        /// The peer sent close_notify, or `close()` was called.
        case closed
        /// With OpenSSL's reason, e.g. "http request" (plain HTTP to the HTTPS port) or "no shared cipher".
        case failed(String)
    }

    private let handle: OpaquePointer
    /// Reused for every copy out of OpenSSL (a record is at most 16 KiB).
    private var chunk = [UInt8](repeating: 0, count: 16 << 10)

    init(handle: OpaquePointer) { self.handle = handle }

    deinit { cdtls_tls_connection_free(handle) }

    public var state: State {
        switch cdtls_tls_connection_state(handle) {
        case CDTLS_TLS_HANDSHAKING: .handshaking
        case CDTLS_TLS_OPEN: .open
        case CDTLS_TLS_CLOSED: .closed
        default: .failed(String(cString: cdtls_tls_connection_error(handle)))
        }
    }

    /// Takes bytes from the socket; returns the state afterwards.
    @discardableResult
    public func receive(_ bytes: UnsafeRawBufferPointer) -> State {
        _ = cdtls_tls_connection_feed(handle, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        return state
    }

    /// Decrypted application bytes received so far (empty when none).
    public func takePlaintext() -> [UInt8] {
        drain { cdtls_tls_connection_read(handle, $0, $1) }
    }

    /// Encrypts `bytes`; false when the connection is not open.
    public func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        cdtls_tls_connection_write(handle, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count) == 1
    }

    /// Bytes to write to the socket (handshake messages, records, alerts), empty when none.
    public func takeOutput() -> [UInt8] {
        drain { cdtls_tls_connection_take_output(handle, $0, $1) }
    }

    /// Queues close_notify if open (then in `takeOutput()`); the state becomes `.closed`.
    public func close() { cdtls_tls_connection_close(handle) }

    private func drain(_ take: (UnsafeMutablePointer<UInt8>, Int) -> Int) -> [UInt8] {
        var result: [UInt8] = []
        while true {
            let count = chunk.withUnsafeMutableBufferPointer { take($0.baseAddress!, $0.count) }
            if count == 0 { return result }
            result += chunk[..<count]
        }
    }
}
