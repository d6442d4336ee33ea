import Bitstream
import Glibc
import StreamrecvTestSupport
import Testing

@Suite struct BitReaderTests {
    @Test func readsFixedWidthAndExpGolomb() throws {
        var writer = BitWriter()
        writer.u(3, 5)
        writer.ue(0)
        writer.ue(1)
        writer.ue(254)
        writer.se(-7)
        writer.se(8)
        writer.u(32, 0xDEAD_BEEF)
        writer.trailingBits()
        var reader = BitReader(writer.bytes[...])
        #expect(try reader.bits(3, "a") == 5)
        #expect(try reader.ue("b") == 0)
        #expect(try reader.ue("c") == 1)
        #expect(try reader.ue("d") == 254)
        #expect(try reader.se("e") == -7)
        #expect(try reader.se("f") == 8)
        #expect(try reader.bits(32, "g") == 0xDEAD_BEEF)
        #expect(!reader.moreRBSPData())
    }

    @Test func dropsEmulationPreventionBytes() throws {
        // RBSP 00 00 01 00 00 00 FF escapes to 00 00 03 01 00 00 03 00 FF.
        let rbsp: [UInt8] = [0, 0, 1, 0, 0, 0, 0xFF]
        let escaped = escapeRBSP(rbsp)
        #expect(escaped == [0, 0, 3, 1, 0, 0, 3, 0, 0xFF])
        var reader = BitReader(escaped[...])
        for expected in rbsp { #expect(try reader.bits(8, "byte") == UInt32(expected)) }
        #expect(reader.bitsRead == 56)
        #expect(throws: BitstreamError.self) { _ = try reader.bits(1, "past end") }
    }

    @Test func errorIsSticky() {
        var reader = BitReader([0xFF][...])
        _ = reader.read(8)
        #expect(!reader.hasError)
        #expect(reader.read(1) == 0)
        #expect(reader.hasError)
        #expect(reader.read(8) == 0)
        #expect(reader.readUE() == 0)
        #expect(reader.hasError)
    }

    @Test func rejectsExpGolombLongerThan32Bits() {
        // 32 leading zero bits cannot encode a 32-bit value.
        var reader = BitReader([0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF][...])
        _ = reader.readUE()
        #expect(reader.hasError)
        var largest = BitWriter()
        largest.ue(UInt64(UInt32.max) - 1)
        var ok = BitReader(largest.bytes[...])
        #expect(ok.readUE() == UInt32.max - 1)
        #expect(!ok.hasError)
    }

    @Test func rangeCheckedRightAfterRead() {
        var writer = BitWriter()
        writer.ue(40)
        var reader = BitReader(writer.bytes[...])
        #expect(throws: BitstreamError.outOfRange(element: "seq_parameter_set_id", value: 40)) {
            _ = try reader.ue("seq_parameter_set_id", max: 31)
        }
    }

    @Test func moreRBSPDataSeesTheStopBit() {
        var writer = BitWriter()
        writer.u(5, 0b10110)
        writer.trailingBits()
        // A cabac_zero_word after the trailing bits is escaped as 00 00 03 and is not the stop bit.
        let bytes = escapeRBSP(writer.bytes + [0, 0]) + [3]
        var reader = BitReader(bytes[...])
        #expect(reader.moreRBSPData())
        _ = reader.read(5)
        #expect(!reader.moreRBSPData())
    }
}
