import Bitstream
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// The session's requests: CSeq, Session, and the credentials once challenged — Digest, or Basic only where
/// rtsp_auth allows it and the server never spoke Digest (a downgrade would hand the password to whoever answers).
extension RTSPSession {
    /// GET_PARAMETER when the server lists it, else OPTIONS. Any answer says the server is alive: some list
    /// GET_PARAMETER and answer an empty one with 451.
    func keepAlive(timeout: TimeAmount) async throws(RTSPFailure) {
        _ = try await request(method: supportsGetParameter ? "GET_PARAMETER" : "OPTIONS", url: sessionURL ?? target.url,
                              timeout: timeout, anyStatus: true)
    }

    /// One request; a 401 is answered with the credentials, and later requests carry them. A second 401 fails,
    /// unless its challenge says the nonce went stale (then the new one is tried once more). A redirect throws
    /// `.redirected` with its Location.
    func request(_ method: String, url: String, headers: [(String, String)] = []) async throws(RTSPFailure) -> RTSPResponse {
        try await request(method: method, url: url, headers: headers, timeout: RTSPConnection.answerTimeout, anyStatus: false)
    }

    func request(method: String, url: String, headers: [(String, String)] = [], timeout: TimeAmount = RTSPConnection.answerTimeout,
                 anyStatus: Bool) async throws(RTSPFailure) -> RTSPResponse {
        guard let connection else { throw .closed }
        var retried = false
        while true {
            cseq += 1
            var all = headers
            if let sessionHeader { all.append(("Session", sessionHeader)) }
            let sentCredentials = challenge != nil && target.user != nil
            if let challenge, let user = target.user {
                nonceCount += 1
                all.append(("Authorization", challenge.authorization(
                    user: user, password: target.password?.text ?? "", method: method, uri: url, count: nonceCount,
                    clientNonce: String(UInt64.random(in: 0...UInt64.max), radix: 16), md5: Self.md5)))
            }
            let response = try await connection.request(method, url: url, cseq: cseq, headers: all, timeout: timeout)
            if response.statusCode == 401 && !anyStatus {
                guard target.user != nil else { throw .unauthorized(credentialsSent: false) }
                let offered = try acceptedChallenge(response.headers(named: "WWW-Authenticate"))
                guard !retried, !sentCredentials || offered.stale else { throw .unauthorized(credentialsSent: true) }
                retried = true
                challenge = offered
                nonceCount = 0
                continue
            }
            if [301, 302, 303, 307].contains(response.statusCode) && !anyStatus {
                guard let location = response.header("Location") else {
                    throw .redirectRefused("\(method) answered \(response.statusCode) without a Location")
                }
                throw .redirected(location)
            }
            guard anyStatus || (200..<300).contains(response.statusCode) else {
                throw .refused(method: method, status: response.statusCode, reason: String(response.reason.prefix(100)))
            }
            return response
        }
    }

    /// The challenge to answer, or why the password is not sent at all.
    private func acceptedChallenge(_ headers: [String]) throws(RTSPFailure) -> RTSPChallenge {
        let spokeDigest = memory.withLockedValue { $0.authentication == .digest }
        let allowBasic = target.authentication == .basic && !spokeDigest
        let offersBasic = headers.contains { $0.trimmingCharacters(in: " \t").lowercased().hasPrefix("basic") }
        switch RTSPChallenge.offer(in: headers, allowingBasic: allowBasic) {
        case .usable(let challenge):
            if case .digest = challenge.scheme { memory.withLockedValue { $0.authentication = .digest } }
            return challenge
        case .digestUnsupported(let algorithms):
            memory.withLockedValue { $0.authentication = .digest }
            let names = algorithms.joined(separator: ", ")
            guard offersBasic else {
                throw .protocolError("the server asks for Digest with \(names), which this client does not speak (it speaks Digest MD5)")
            }
            throw .insecureAuthentication("the server offers Digest with \(names), which this client does not speak, and Basic, "
                                          + "which would send the password in clear; the password was not sent")
        case .basicNotAllowed where spokeDigest:
            throw .insecureAuthentication("the server asks for Basic authentication but asked for Digest before (a downgrade: "
                                          + "whoever answers on its port may not be the camera); the password was not sent")
        case .basicNotAllowed:
            throw .insecureAuthentication("the server asks for Basic authentication, which would send the password in clear; "
                                          + "set rtsp_auth = \"basic\" to allow it")
        case .none:
            throw .protocolError("the server asks for an authentication this client does not speak (it speaks Digest MD5 and Basic)")
        }
    }

    func takeSession(from response: RTSPResponse) throws(RTSPFailure) {
        guard let header = response.header("Session"), let id = header.split(separator: ";").first?.trimmingCharacters(in: " \t"), !id.isEmpty else {
            throw .protocolError("SETUP's answer has no Session header")
        }
        sessionHeader = id
        sessionTimeoutSeconds = Self.sessionTimeout(header)
    }
}
