/// Builds one JSON object with its keys in insertion order (Foundation's encoders do not promise an order,
/// and the `inspect --json` format documents one).
struct JSONLine {
    private var text = "{"

    init() {}

    mutating func add(_ key: String, _ value: String?) {
        appendKey(key)
        if let value { text += Self.quoted(value) } else { text += "null" }
    }

    mutating func add(_ key: String, _ value: Int?) {
        appendKey(key)
        text += value.map(String.init) ?? "null"
    }

    mutating func add(_ key: String, _ value: Int64) {
        appendKey(key)
        text += String(value)
    }

    mutating func add(_ key: String, _ value: UInt64) {
        appendKey(key)
        text += String(value)
    }

    mutating func add(_ key: String, _ value: Double?) {
        appendKey(key)
        text += value.map { $0.isFinite ? String($0) : "null" } ?? "null"
    }

    mutating func add(_ key: String, _ value: Bool) {
        appendKey(key)
        text += value ? "true" : "false"
    }

    mutating func add(_ key: String, _ values: [Int]) {
        appendKey(key)
        text += "[" + values.map(String.init).joined(separator: ",") + "]"
    }

    mutating func add(_ key: String, _ values: [String]) {
        appendKey(key)
        text += "[" + values.map(Self.quoted).joined(separator: ",") + "]"
    }

    mutating func add(_ key: String, object: JSONLine) {
        appendKey(key)
        text += object.rendered
    }

    var rendered: String { text + "}" }

    private mutating func appendKey(_ key: String) {
        if text.count > 1 { text += "," }
        text += Self.quoted(key) + ":"
    }

    static func quoted(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
