import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A local user's ring whose object name and stream name carry an escape sequence and a right-to-left override:
/// what `cat` and `status` print of them reaches a terminal (reliability.md row 40).
@Suite struct PrintableNamesTests {
    @Test func catAndStatusPrintNoEscapeOrBidirectionalControl() throws {
        let shmName = "streamrecv-rt\u{1B}[2J\u{202E}x-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { shm_unlink("/" + shmName) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: shmName, streamName: "evil\u{202E}name\u{1B}]0;x", slotCount: 2, maxWidth: 32, maxHeight: 32))
        _ = writer.publish(layout: FrameLayout(format: .yuv420p, width: 32, height: 32), metadata: FrameMetadata()) { _, _ in }
        let tool = TestEnvironment.productsDirectory.appendingPathComponent("streamrecvctl").path
        // cat names the object on standard error, then times out waiting for a next frame.
        let cat = try runProcess(tool, ["cat", "--shm", shmName, "--frames", "1", "--format", "raw", "--timeout", "0.3"])
        #expect(cat.standardError.contains("reading /dev/shm/streamrecv-rt"), "\(cat.standardError)")
        let status = try runProcess(tool, ["status", "--shm", shmName])
        #expect(status.text.contains("evil?name"), "\(status.text)")
        for output in [cat.standardError, cat.text, status.text, status.standardError] {
            #expect(!output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E }, "\(output.debugDescription)")
        }
        writer.close()
    }
}
