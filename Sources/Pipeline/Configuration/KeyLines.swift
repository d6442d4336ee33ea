/// Finds the line of a key in the TOML text, for error messages: TOMLKit reports lines for syntax errors only.
/// Knows tables (`[daemon]`), arrays of tables (`[[stream]]`) and their inline forms (`stream = [{ name = "a" }]`,
/// `daemon = { log_level = "info" }`), strings (so that a `#`, `=` or brace inside one is not taken for syntax)
/// and comments. The text has already parsed as TOML: this only has to place keys, not to judge them.
struct KeyLines {
    private var entries: [(section: String?, index: Int?, key: String, line: Int)] = []
    private var sections: [(section: String, index: Int?, line: Int)] = []

    init(_ text: String) {
        // A byte-order mark (an editor on another system may write one) is no key: TOML allows it, and taken
        // for one it hid the first table's header, so that every later line was placed in the wrong table.
        var characters = Array(text.unicodeScalars)
        if characters.first == "\u{FEFF}" { characters.removeFirst() }
        var scanner = Scanner(characters: characters)
        scanner.run()
        entries = scanner.entries
        sections = scanner.sections
    }

    func line(section: String?, index: Int?, key: String?) -> Int? {
        if let key, let entry = entries.first(where: { $0.section == section && $0.index == index && $0.key == key }) {
            return entry.line
        }
        return sections.first { $0.section == section && $0.index == index }?.line
    }

    /// Every key of one table, with the table's line.
    func places(section: String, index: Int?) -> KeyPlaces {
        var places = KeyPlaces(table: sections.first { $0.section == section && $0.index == index }?.line)
        for entry in entries where entry.section == section && entry.index == index && places.keys[entry.key] == nil {
            places.keys[entry.key] = entry.line
        }
        return places
    }

    /// One pass over the text. Keys are read where a key may stand: at the start of a line outside any inline
    /// value, or after `{` or `,` inside an inline table.
    private struct Scanner {
        let characters: [Unicode.Scalar]
        var position = 0
        var line = 1
        var entries: [(section: String?, index: Int?, key: String, line: Int)] = []
        var sections: [(section: String, index: Int?, line: Int)] = []
        private var section: String?
        private var index: Int?
        private var tableCounts: [String: Int] = [:]

        init(characters: [Unicode.Scalar]) { self.characters = characters }

        var current: Unicode.Scalar? { position < characters.count ? characters[position] : nil }

        mutating func advance() {
            if current == "\n" { line += 1 }
            position += 1
        }

        mutating func skipBlanks(newlines: Bool) {
            while let character = current, character == " " || character == "\t" || character == "\r" || (newlines && character == "\n") {
                advance()
            }
        }

        mutating func run() {
            while current != nil {
                skipBlanks(newlines: true)
                guard let character = current else { return }
                switch character {
                case "#": skipComment()
                case "[": header()
                default:
                    guard let key = readKey() else {
                        skipToNewline()
                        continue
                    }
                    entries.append((section, index, key.name, key.line))
                    value(owner: key.name)
                }
            }
        }

        /// `[name]` or `[[name]]`: the section that the following keys belong to.
        mutating func header() {
            let start = line
            advance()
            let isArray = current == "["
            if isArray { advance() }
            var name = ""
            while let character = current, character != "]", character != "\n" {
                name.unicodeScalars.append(character)
                advance()
            }
            name = name.trimmingCharacters(in: " \t\"")
            enterTable(name, isArray: isArray, line: start)
            skipToNewline()
        }

        mutating func enterTable(_ name: String, isArray: Bool, line: Int) {
            section = name
            if isArray {
                index = tableCounts[name, default: 0]
                tableCounts[name] = index! + 1
            } else {
                index = nil
            }
            sections.append((name, index, line))
        }

        /// A bare or quoted key (dotted keys are kept whole), up to its `=`; nil when no key stands here.
        mutating func readKey() -> (name: String, line: Int)? {
            let start = line
            var name = ""
            while let character = current, character != "=", character != "\n", character != "#" {
                if character == "\"" || character == "'" {
                    name += readString()
                } else {
                    name.unicodeScalars.append(character)
                    advance()
                }
            }
            guard current == "=" else { return nil }
            advance()
            name = name.trimmingCharacters(in: " \t")
            return name.isEmpty ? nil : (name, start)
        }

        /// A value after `owner =`: an inline array of tables or an inline table opens `owner`'s section.
        mutating func value(owner: String) {
            skipBlanks(newlines: false)
            switch current {
            case "{":
                inlineTable(named: owner, isArray: false)
            case "[":
                advance()
                var depth = 1
                while let character = current, depth > 0 {
                    switch character {
                    case "\"", "'": _ = readString()
                    case "#": skipComment()
                    case "[": depth += 1; advance()
                    case "]": depth -= 1; advance()
                    case "{" where depth == 1: inlineTable(named: owner, isArray: true)
                    case "{": skipInline()
                    default: advance()
                    }
                }
            default:
                while let character = current, character != "\n", character != "#" {
                    if character == "\"" || character == "'" { _ = readString() } else { advance() }
                }
            }
        }

        /// `{ key = value, … }`: its keys belong to `name` (and its place in an array of tables).
        mutating func inlineTable(named name: String, isArray: Bool) {
            let saved = (section, index)
            if section == nil { enterTable(name, isArray: isArray, line: line) }
            advance()
            while true {
                skipBlanks(newlines: true)
                guard let character = current else { break }
                if character == "}" {
                    advance()
                    break
                }
                if character == "," {
                    advance()
                    continue
                }
                guard let key = readKey() else { break }
                entries.append((section, index, key.name, key.line))
                inlineValue()
            }
            (section, index) = saved
        }

        /// A value inside an inline table, up to the `,` or `}` that ends it.
        mutating func inlineValue() {
            skipBlanks(newlines: false)
            while let character = current, character != ",", character != "}" {
                switch character {
                case "\"", "'": _ = readString()
                case "[", "{": skipInline()
                default: advance()
                }
            }
        }

        /// A nested array or table, skipped whole.
        mutating func skipInline() {
            var depth = 0
            repeat {
                switch current {
                case "\"", "'": _ = readString()
                case "[", "{": depth += 1; advance()
                case "]", "}": depth -= 1; advance()
                case "#": skipComment()
                case nil: return
                default: advance()
                }
            } while depth > 0
        }

        /// A basic or literal string, single- or multi-line; returns its raw text between the quotes.
        mutating func readString() -> String {
            let quote = current!
            let isMultiline = position + 2 < characters.count && characters[position + 1] == quote && characters[position + 2] == quote
            let width = isMultiline ? 3 : 1
            for _ in 0..<width { advance() }
            var text = ""
            while let character = current {
                if character == "\\" && quote == "\"" {
                    advance()
                    advance()
                    continue
                }
                if character == quote, !isMultiline || (position + 2 < characters.count
                    && characters[position + 1] == quote && characters[position + 2] == quote) {
                    for _ in 0..<width { advance() }
                    return text
                }
                if character == "\n" && !isMultiline { return text }
                text.unicodeScalars.append(character)
                advance()
            }
            return text
        }

        mutating func skipComment() {
            while let character = current, character != "\n" { advance() }
        }

        mutating func skipToNewline() {
            while let character = current, character != "\n" {
                if character == "\"" || character == "'" { _ = readString() } else { advance() }
            }
        }
    }
}
