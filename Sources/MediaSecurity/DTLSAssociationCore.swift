import CDTLS

/// The one owner of a `cdtls_association`, shared by the server association and the tests' client. Confined to
/// one thread, like everything OpenSSL does with one SSL object.
final class DTLSAssociationCore {
    private let handle: OpaquePointer
    private var keysDelivered = false
    private var exportFailed = false

    init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        cdtls_association_free(handle)
    }

    func receive(_ datagram: [UInt8]) -> DTLSEvent {
        let state = datagram.withUnsafeBufferPointer { cdtls_association_feed(handle, $0.baseAddress, $0.count) }
        return event(for: state)
    }

    func takeOutgoingDatagrams() -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        // Capacity 0 asks for the next datagram's length without taking it.
        while case let length = cdtls_association_next_datagram(handle, nil, 0), length > 0 {
            let datagram = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
                let copied = cdtls_association_next_datagram(handle, buffer.baseAddress, buffer.count)
                count = copied <= buffer.count ? copied : 0
            }
            guard !datagram.isEmpty else { break }
            datagrams.append(datagram)
        }
        return datagrams
    }

    var retransmissionDelay: Duration? {
        let milliseconds = cdtls_association_timeout_ms(handle)
        return milliseconds >= 0 ? .milliseconds(milliseconds) : nil
    }

    func handleRetransmissionTimer() -> DTLSEvent {
        event(for: cdtls_association_handle_timeout(handle))
    }

    /// Rounded to whole milliseconds, at least 1 and at most a minute (the longest DTLS timeout). OpenSSL takes
    /// less than 15 ms left for expired: below that a flight is sent again at once (only tests go so low).
    func setInitialRetransmissionTimeout(_ timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        // Clamped in seconds first: a duration of Int64.max seconds must not overflow into a trap.
        let milliseconds = min(max(seconds, 0), 60) * 1000 + attoseconds / 1_000_000_000_000_000
        cdtls_association_set_initial_timeout_ms(handle, UInt32(clamping: min(max(milliseconds, 1), 60_000)))
    }

    /// A client sends its ClientHello; a server waits for one.
    func connect() {
        _ = cdtls_association_connect(handle)
    }

    func close() {
        cdtls_association_close(handle)
    }

    var peerFingerprintSHA256: [UInt8]? {
        let fingerprint = [UInt8](unsafeUninitializedCapacity: Int(CDTLS_FINGERPRINT_SIZE)) { buffer, count in
            count = cdtls_association_peer_fingerprint_sha256(handle, buffer.baseAddress) == 1 ? buffer.count : 0
        }
        return fingerprint.isEmpty ? nil : fingerprint
    }

    private func event(for state: cdtls_state) -> DTLSEvent {
        if exportFailed { return .failed(.keyExportFailed) }
        switch state {
        case CDTLS_STATE_HANDSHAKING:
            return .handshaking
        case CDTLS_STATE_CONNECTED:
            if keysDelivered { return .established }
            keysDelivered = true
            guard let keys = exportKeyingMaterial() else {
                exportFailed = true
                cdtls_association_close(handle)
                return .failed(.keyExportFailed)
            }
            return .connected(keys)
        case CDTLS_STATE_CLOSED:
            return .closed
        default:
            return .failed(failure)
        }
    }

    private var failure: DTLSFailure {
        let reason = String(cString: cdtls_association_error(handle))
        switch cdtls_association_failure(handle) {
        case CDTLS_FAILURE_FINGERPRINT_MISMATCH: return .fingerprintMismatch
        case CDTLS_FAILURE_NO_SRTP_PROFILE: return .noCommonSRTPProfile
        case CDTLS_FAILURE_NO_PEER_CERTIFICATE: return .noPeerCertificate
        case CDTLS_FAILURE_TIMED_OUT: return .timedOut
        case CDTLS_FAILURE_PEER_ALERT: return .peerAlert(reason)
        default: return .handshakeFailed(reason)
        }
    }

    private func exportKeyingMaterial() -> DTLSKeyingMaterial? {
        var profileID: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: Int(CDTLS_SRTP_KEYING_CAPACITY)) { buffer, count in
            count = cdtls_association_srtp_keying(handle, buffer.baseAddress, buffer.count, &profileID)
        }
        guard let profile = SRTPProfile(ianaID: Int(profileID)) else { return nil }
        return DTLSKeyingMaterial(exported: bytes, profile: profile)
    }
}
