import Foundation
@testable import streamrecvctl
import Testing

/// What a JSON parser reads back from `JSONLine.quoted(text)`, as the value of a one-element array.
private func parsedBack(_ text: String) throws -> String? {
    let array = try JSONSerialization.jsonObject(with: Data(("[" + JSONLine.quoted(text) + "]").utf8)) as? [Any]
    return array?.first as? String
}

@Suite struct JSONLineTests {
    @Test func anEmptyLineIsAnEmptyObject() {
        #expect(JSONLine().rendered == "{}")
    }

    /// `inspect --json` documents its key order; Foundation's encoders would not keep it.
    @Test func keysKeepTheOrderTheyWereAddedIn() {
        var line = JSONLine()
        line.add("zeta", 1 as Int?)
        line.add("alpha", "a")
        line.add("mid", true)
        #expect(line.rendered == #"{"zeta":1,"alpha":"a","mid":true}"#)
    }

    @Test func eachValueTypeIsWrittenAsJSON() {
        var line = JSONLine()
        line.add("s", "text")
        line.add("i", -42 as Int?)
        line.add("i64", Int64.min)
        line.add("u64", UInt64.max)
        line.add("d", 0.5 as Double?)
        line.add("t", true)
        line.add("f", false)
        line.add("ints", [3, -1, 0])
        line.add("strings", ["x", "y\"z"])
        #expect(line.rendered == #"{"s":"text","i":-42,"i64":-9223372036854775808,"u64":18446744073709551615,"#
            + #""d":0.5,"t":true,"f":false,"ints":[3,-1,0],"strings":["x","y\"z"]}"#)
    }

    @Test func absentValuesAreNull() {
        var line = JSONLine()
        line.add("s", nil as String?)
        line.add("i", nil as Int?)
        line.add("d", nil as Double?)
        #expect(line.rendered == #"{"s":null,"i":null,"d":null}"#)
    }

    /// JSON has no NaN or infinity: a frame rate of 0/0 or 1/0 must not make the line unparsable.
    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func aNonFiniteNumberIsNull(value: Double) {
        var line = JSONLine()
        line.add("fps", value as Double?)
        #expect(line.rendered == #"{"fps":null}"#)
    }

    /// Swift writes large and small doubles with an exponent ("1e-07", "1e+300"): still JSON numbers.
    @Test(arguments: [25.0, 29.97002997002997, 1e-7, 1e300, -0.0, Double(Int64.max)])
    func doublesReadBackAsTheSameNumber(value: Double) throws {
        var line = JSONLine()
        line.add("n", value as Double?)
        let object = try JSONSerialization.jsonObject(with: Data(line.rendered.utf8)) as? [String: Any]
        #expect((object?["n"] as? NSNumber)?.doubleValue == value, "\(line.rendered)")
    }

    @Test func emptyArraysAreWrittenAsEmptyArrays() {
        var line = JSONLine()
        line.add("ints", [Int]())
        line.add("strings", [String]())
        #expect(line.rendered == #"{"ints":[],"strings":[]}"#)
    }

    @Test func aNestedObjectIsWrittenInPlace() {
        var inner = JSONLine()
        inner.add("rotation", 90.0 as Double?)
        var line = JSONLine()
        line.add("type", "au")
        line.add("orientation", object: inner)
        line.add("end", "next_au")
        #expect(line.rendered == #"{"type":"au","orientation":{"rotation":90.0},"end":"next_au"}"#)
    }

    @Test func keysAreEscapedLikeValues() {
        var line = JSONLine()
        line.add("a\"b\n", 1 as Int?)
        #expect(line.rendered == #"{"a\"b\n":1}"#)
    }

    // MARK: Escaping

    @Test func quotesBackslashesAndTheCommonControlsHaveShortEscapes() {
        #expect(JSONLine.quoted("say \"hi\"") == #""say \"hi\"""#)
        #expect(JSONLine.quoted(#"C:\dir"#) == #""C:\\dir""#)
        #expect(JSONLine.quoted("a\nb\rc\td") == #""a\nb\rc\td""#)
    }

    /// Every other C0 control (NUL, BEL, backspace, form feed, ESC, …) is \u00XX: four hex digits, lower case.
    @Test func otherC0ControlsAreFourDigitEscapes() {
        #expect(JSONLine.quoted("\u{0}") == #""\u0000""#)
        #expect(JSONLine.quoted("\u{7}\u{8}\u{C}") == #""\u0007\u0008\u000c""#)
        #expect(JSONLine.quoted("\u{1B}[2J") == #""\u001b[2J""#)
        #expect(JSONLine.quoted("\u{1F}") == #""\u001f""#)
    }

    /// DEL and the C1 controls are legal in JSON strings but reach a terminal raw (CSI is U+009B): escaped too.
    @Test func deleteAndC1ControlsAreEscaped() {
        #expect(JSONLine.quoted("\u{7F}") == #""\u007f""#)
        #expect(JSONLine.quoted("\u{80}\u{85}\u{9B}\u{9F}") == #""\u0080\u0085\u009b\u009f""#)
    }

    /// The first character after the C1 range, and everything beyond ASCII, is written as itself (UTF-8).
    @Test func nonASCIITextIsWrittenAsItself() {
        #expect(JSONLine.quoted("\u{A0}") == "\"\u{A0}\"")
        #expect(JSONLine.quoted("café ☕ 😀 日本") == "\"café ☕ 😀 日本\"")
        #expect(JSONLine.quoted(" ~") == "\" ~\"")
    }

    /// A combining sequence is several scalars in one Character: none of them may be lost or reordered.
    @Test func combiningSequencesKeepEveryScalar() {
        let text = "e\u{301}\u{1F1EB}\u{1F1F7}"
        #expect(JSONLine.quoted(text).unicodeScalars.elementsEqual("\"\(text)\"".unicodeScalars))
    }

    /// Any scalar from U+0000 to U+02FF, and a few far ones, parses back to itself.
    @Test func everyStringParsesBackToItself() throws {
        let scalars = (0...0x2FF).compactMap(Unicode.Scalar.init) + ["\u{2028}", "\u{202E}", "\u{FEFF}", "\u{FFFD}", "\u{10FFFF}"]
        for scalar in scalars {
            let text = "<\(Character(scalar))>"
            #expect(try parsedBack(text) == text, "U+\(String(scalar.value, radix: 16))")
        }
        let all = String(String.UnicodeScalarView(scalars))
        #expect(try parsedBack(all) == all)
    }

    /// The quoted form of any string is one line: no raw control character of any kind remains in it.
    @Test func theQuotedFormHasNoRawControlCharacter() {
        let text = String(String.UnicodeScalarView((0...0x9F).compactMap(Unicode.Scalar.init)))
        let quoted = JSONLine.quoted(text)
        #expect(!quoted.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }
}
