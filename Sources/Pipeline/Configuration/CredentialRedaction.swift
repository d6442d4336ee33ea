extension RTSPSource {
    /// Names whose values are credentials when they appear in a URL's path or query, in any case and as part of a
    /// longer name (`loginPassword`, `api_key`, `access_token`, `pass-word`): over-redacting a `keyframe=` costs
    /// nothing.
    static let credentialNames = ["user", "pass", "pw", "token", "auth", "key", "secret", "login", "sign", "cred", "sess", "sid"]

    /// `path` with the value of every credential-looking `NAME=VALUE` replaced by `***`, whatever separates the
    /// parameters: a query's `&`, a path parameter's `;`, or the `_` of XMEye-style paths
    /// (`/user=admin_password=SECRET_channel=1_stream=0.sdp`). A name is what stands between the last separator (or
    /// the end of the previous value) and its `=`, percent-decoded, letters and digits only (`my_pass-word_`,
    /// `pa%73sword`); `%3D` counts as `=`. A value runs to the next `&`, `;`, `/`, `?` or `#`, or to a `_`, `,` or `.`
    /// that begins the next `NAME=`. A password holding such a sequence itself is cut there: put passwords in
    /// `rtsp_password_file` rather than in the URL.
    static func redactingCredentials(_ path: String) -> String {
        let characters = Array(path.unicodeScalars)
        var output = String.UnicodeScalarView()
        var index = 0
        var nameStart = 0
        while index < characters.count {
            let equals = equalsWidth(at: index, in: characters)
            guard equals > 0 else {
                if "&;/?#".unicodeScalars.contains(characters[index]) { nameStart = index + 1 }
                output.append(characters[index])
                index += 1
                continue
            }
            output.append(contentsOf: characters[index..<index + equals])
            let name = normalizedName(characters[nameStart..<index])
            index += equals
            guard credentialNames.contains(where: { name.contains($0) }) else {
                nameStart = index
                continue
            }
            let end = valueEnd(from: index, in: characters)
            if end > index { output.append(contentsOf: "***".unicodeScalars) }
            index = end
            nameStart = end
        }
        return String(output)
    }

    /// 1 for `=`, 3 for `%3D`, else 0.
    private static func equalsWidth(at index: Int, in characters: [Unicode.Scalar]) -> Int {
        if characters[index] == "=" { return 1 }
        guard characters[index] == "%", index + 2 < characters.count, characters[index + 1] == "3",
              characters[index + 2] == "D" || characters[index + 2] == "d" else { return 0 }
        return 3
    }

    /// A parameter's name as compared: percent-decoded, letters and digits only, lower-cased.
    private static func normalizedName(_ characters: ArraySlice<Unicode.Scalar>) -> String {
        var bytes: [UInt8] = []
        var index = characters.startIndex
        while index < characters.endIndex {
            let character = characters[index]
            if character == "%", index + 2 < characters.endIndex,
               characters[index + 1].isASCII, characters[index + 2].isASCII,
               let high = hexValue(UInt8(characters[index + 1].value)), let low = hexValue(UInt8(characters[index + 2].value)) {
                bytes.append(high << 4 | low)
                index += 3
                continue
            }
            if character.isASCII { bytes.append(UInt8(character.value)) }
            index += 1
        }
        return String(decoding: bytes.filter { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) }.map { $0 | ($0 >= 0x41 ? 0x20 : 0) },
                      as: UTF8.self)
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
        return next < characters.count && (characters[next] == "=" || equalsWidth(at: next, in: characters) == 3)
    }
}
