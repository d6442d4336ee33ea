extension RTSPSource {
    /// Names whose values are credentials when they appear in a URL's path or query, in any case and as part of a
    /// longer name (`loginPassword`, `api_key`, `access_token`): over-redacting a `keyframe=` costs nothing.
    static let credentialNames = ["user", "pass", "pw", "token", "auth", "key", "secret", "login", "sign"]

    /// `path` with the value of every credential-looking `NAME=VALUE` replaced by `***`, whatever separates the
    /// parameters: a query's `&`, a path parameter's `;`, or the `_` of XMEye-style paths
    /// (`/user=admin_password=SECRET_channel=1_stream=0.sdp`). A value runs to the next `&`, `;`, `/`, `?` or `#`,
    /// or to a `_`, `,` or `.` that begins the next `NAME=`. A password holding such a sequence itself is cut there:
    /// put passwords in `rtsp_password_file` rather than in the URL.
    static func redactingCredentials(_ path: String) -> String {
        let characters = Array(path.unicodeScalars)
        var output = String.UnicodeScalarView()
        var index = 0
        while index < characters.count {
            let character = characters[index]
            output.append(character)
            index += 1
            guard character == "=", isCredentialName(before: index - 1, in: characters) else { continue }
            let end = valueEnd(from: index, in: characters)
            if end > index { output.append(contentsOf: "***".unicodeScalars) }
            index = end
        }
        return String(output)
    }

    /// Whether the letters and digits just before `equals` name a credential.
    private static func isCredentialName(before equals: Int, in characters: [Unicode.Scalar]) -> Bool {
        var start = equals
        while start > 0, characters[start - 1].properties.isAlphabetic || ("0"..."9").contains(characters[start - 1]) { start -= 1 }
        guard start < equals else { return false }
        let name = String(String.UnicodeScalarView(characters[start..<equals])).lowercased()
        return credentialNames.contains { name.contains($0) }
    }

    /// Where a value that starts at `start` ends.
    private static func valueEnd(from start: Int, in characters: [Unicode.Scalar]) -> Int {
        var index = start
        while index < characters.count {
            let character = characters[index]
            if "&;/?#".unicodeScalars.contains(character) { return index }
            if "_,.".unicodeScalars.contains(character), beginsParameter(at: index + 1, in: characters) { return index }
            index += 1
        }
        return index
    }

    /// Whether a `NAME=` (a letter, then letters and digits) begins at `index`.
    private static func beginsParameter(at index: Int, in characters: [Unicode.Scalar]) -> Bool {
        guard index < characters.count, characters[index].properties.isAlphabetic else { return false }
        var next = index
        while next < characters.count, characters[next].properties.isAlphabetic || ("0"..."9").contains(characters[next]) { next += 1 }
        return next < characters.count && characters[next] == "="
    }
}
