/// RTSP authentication (RFC 2326 §D.2, RFC 7616/2617): the challenge a server sends with 401, and the
/// Authorization header that answers it. Digest is preferred; Basic only when it is all the server offers and the
/// caller allows it (it sends the password in clear).
/// The hash is the caller's (MD5 is not this module's business): `md5` maps bytes to their 16-byte digest.
public struct RTSPChallenge: Sendable, Equatable {
    public enum Scheme: Sendable, Equatable {
        case digest(realm: String, nonce: String, opaque: String?, qualityOfProtection: Bool, sessionAlgorithm: Bool)
        case basic
    }

    public var scheme: Scheme
    /// Digest's stale=true: the nonce expired, the credentials were right (RFC 2617 §3.2.1).
    public var stale = false

    /// The Digest challenge among a 401's WWW-Authenticate headers, else Basic when it is all the server offers;
    /// nil when none is usable. Never Basic when Digest is offered in any form (e.g. SHA-256 only, which this
    /// client does not speak): the password would go in clear where the server can check it without.
    public init?(headers: [String]) {
        guard case .usable(let challenge) = Self.offer(in: headers, allowingBasic: true) else { return nil }
        self = challenge
    }

    /// What a 401's challenges leave a client that must not send the password in clear unless `allowingBasic`.
    public enum Offer: Sendable, Equatable {
        case usable(RTSPChallenge)
        /// Digest is offered, but only with algorithms this client does not speak; Basic is not taken instead.
        case digestUnsupported(algorithms: [String])
        /// Basic is all the server offers, and the caller does not allow it.
        case basicNotAllowed
        /// Nothing this client speaks.
        case none
    }

    public static func offer(in headers: [String], allowingBasic: Bool) -> Offer {
        var basic = false
        var algorithms: [String] = []
        for header in headers {
            let trimmed = header.trimmingSpaces()
            let schemeEnd = trimmed.firstIndex(of: " ") ?? trimmed.endIndex
            let name = trimmed[..<schemeEnd].lowercased()
            if name == "basic" { basic = true }
            guard name == "digest" else { continue }
            let parameters = Self.parameters(String(trimmed[schemeEnd...]))
            let algorithm = (parameters["algorithm"] ?? "MD5").uppercased()
            algorithms.append(String(algorithm.prefix(32)))
            guard let nonce = parameters["nonce"], algorithm == "MD5" || algorithm == "MD5-SESS" else { continue }
            // qop="auth,auth-int": auth is all a request without a body needs.
            let qop = parameters["qop"].map { $0.split(separator: ",").contains { $0.trimmingSpaces() == "auth" } } ?? false
            var challenge = RTSPChallenge(scheme: .digest(realm: parameters["realm"] ?? "", nonce: nonce, opaque: parameters["opaque"],
                                                          qualityOfProtection: qop, sessionAlgorithm: algorithm == "MD5-SESS"))
            challenge.stale = parameters["stale"]?.lowercased() == "true"
            return .usable(challenge)
        }
        if !algorithms.isEmpty { return .digestUnsupported(algorithms: Array(algorithms.prefix(4))) }
        guard basic else { return .none }
        return allowingBasic ? .usable(RTSPChallenge(scheme: .basic)) : .basicNotAllowed
    }

    public init(scheme: Scheme) {
        self.scheme = scheme
    }

    /// The Authorization header's value for one request. `count` is the request's nonce count (from 1, for qop);
    /// `clientNonce` any fresh random text.
    public func authorization(user: String, password: String, method: String, uri: String, count: Int,
                              clientNonce: String, md5: ([UInt8]) -> [UInt8]) -> String {
        func hex(_ text: String) -> String {
            md5(Array(text.utf8)).map { byte in
                let digits = Array("0123456789abcdef".utf8)
                return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
            }.joined()
        }
        switch scheme {
        case .basic:
            return "Basic " + Base64.encode(Array("\(user):\(password)".utf8))
        case .digest(let realm, let nonce, let opaque, let qop, let session):
            var ha1 = hex("\(user):\(realm):\(password)")
            if session { ha1 = hex("\(ha1):\(nonce):\(clientNonce)") }
            let ha2 = hex("\(method):\(uri)")
            let digits = String(count, radix: 16)
            let nc = String(repeating: "0", count: max(0, 8 - digits.count)) + digits
            let response = qop ? hex("\(ha1):\(nonce):\(nc):\(clientNonce):auth:\(ha2)") : hex("\(ha1):\(nonce):\(ha2)")
            // Quoted strings are written back escaped, as they were read unescaped (a realm may hold quotes).
            func quoted(_ text: String) -> String {
                var escaped = String.UnicodeScalarView()
                for scalar in text.unicodeScalars {  // scalars, not Characters: a quote with a combining mark is still one
                    if scalar == "\\" || scalar == "\"" { escaped.append("\\") }
                    escaped.append(scalar)
                }
                return "\"" + String(escaped) + "\""
            }
            var value = "Digest username=\(quoted(user)), realm=\(quoted(realm)), nonce=\(quoted(nonce)), uri=\(quoted(uri)), response=\"\(response)\""
            if session { value += ", algorithm=MD5-sess" }
            if let opaque { value += ", opaque=\(quoted(opaque))" }
            if qop { value += ", qop=auth, nc=\(nc), cnonce=\"\(clientNonce)\"" }
            return value
        }
    }

    /// `realm="a", nonce="b", stale=FALSE` to a dictionary (names lower-cased; quotes and escapes removed).
    static func parameters(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        var characters = Substring(text)
        while !characters.isEmpty {
            while let first = characters.first, first == " " || first == "," || first == "\t" { characters = characters.dropFirst() }
            guard let equals = characters.firstIndex(of: "=") else { break }
            let name = characters[..<equals].trimmingSpaces().lowercased()
            characters = characters[characters.index(after: equals)...]
            while characters.first == " " { characters = characters.dropFirst() }
            var value = ""
            if characters.first == "\"" {
                characters = characters.dropFirst()
                var escaped = false
                while let character = characters.first {
                    characters = characters.dropFirst()
                    if escaped {
                        value.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
            } else {
                let end = characters.firstIndex(of: ",") ?? characters.endIndex
                value = characters[..<end].trimmingSpaces()
                characters = characters[end...]
            }
            result[name] = value
        }
        return result
    }
}
