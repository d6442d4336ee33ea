import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// FFmpeg's decode of `path` as raw planar frames.
func referenceFrames(_ path: String, frameBytes: Int) throws -> [[UInt8]] {
    let raw = try runChecked("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]).standardOutput
    let bytes = [UInt8](raw)
    return stride(from: 0, to: bytes.count, by: frameBytes).map { Array(bytes[$0..<min(bytes.count, $0 + frameBytes)]) }
}

/// A reader thread that takes every frame it can, at its own pace, and checks each against the reference.
final class CheckingReader: @unchecked Sendable {
    let reader: FrameRingReader
    let delayMicroseconds: UInt32
    let reference: [[UInt8]]
    private(set) var accepted = 0
    private(set) var mismatches = 0
    private(set) var lastSequence: UInt64
    /// Sequence number of the first frame of the current run of the reference (frames are numbered across runs).
    var firstSequence: UInt64
    private var thread: Thread?

    init(shmName: String, delayMicroseconds: UInt32, reference: [[UInt8]], after sequence: UInt64) throws {
        reader = try FrameRingReader(shmName: shmName)
        self.delayMicroseconds = delayMicroseconds
        self.reference = reference
        lastSequence = sequence
        firstSequence = sequence + 1
    }

    /// Reads until `until` frames of this run have been seen or skipped.
    func start(until count: Int) {
        let thread = Thread { [self] in
            var pixels: [UInt8] = []
            while lastSequence < firstSequence + UInt64(count) - 1 {
                guard case .frame(let info) = reader.next(after: lastSequence, into: &pixels, timeoutNanoseconds: 20_000_000_000) else { break }
                let index = Int(info.sequence - firstSequence)
                if index < 0 || index >= reference.count || PlanarConversion.planar(pixels, layout: info.layout) != reference[index] {
                    mismatches += 1
                }
                accepted += 1
                lastSequence = info.sequence
                if delayMicroseconds > 0 { usleep(delayMicroseconds) }
            }
        }
        self.thread = thread
        thread.start()
    }

    func join() {
        while thread?.isFinished == false { usleep(10_000) }
    }
}

@Suite(.serialized) struct SharedMemoryReaderTests {
    @Test func readersAtThreeSpeedsAKilledReaderAndADaemonRestart() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 90,
                                              encoderParameters: "keyint=30:bframes=2", in: directory, name: "r.h264")
        let stream = [UInt8](try Data(contentsOf: url))
        let reference = try referenceFrames(url.path, frameBytes: 320 * 240 * 3 / 2)
        #expect(reference.count == 90)
        let daemon = try DaemonProcess(label: "readers", settings: ["max_width": "320", "max_height": "240", "slots": "6"])

        let fast = try CheckingReader(shmName: daemon.shmName, delayMicroseconds: 0, reference: reference, after: 0)
        let medium = try CheckingReader(shmName: daemon.shmName, delayMicroseconds: 5_000, reference: reference, after: 0)
        let slow = try CheckingReader(shmName: daemon.shmName, delayMicroseconds: 60_000, reference: reference, after: 0)
        for reader in [fast, medium, slow] { reader.start(until: 90) }
        // A consumer process that dies mid-read must not matter to anyone.
        let victim = try CatProcess(stream: daemon.name, frames: 90, directory: directory)

        let middle = StreamFacts(stream).accessUnitOffsets[45]
        let sender = try Sender(port: daemon.port)
        try sender.sendPaced(Array(stream[..<middle]), pauseMicroseconds: 2_000)
        kill(victim.process.processIdentifier, SIGKILL)
        try sender.send(stream[middle...])
        sender.close()
        #expect(daemon.waitUntilPublished(90))
        for reader in [fast, medium, slow] { reader.join() }
        #expect(victim.finish().status != 0)

        for reader in [fast, medium, slow] {
            #expect(reader.mismatches == 0, "a torn or wrong frame was accepted")
            #expect(UInt64(reader.accepted) + reader.reader.lappedFrames == 90)
        }
        // The writer overwrote frames the slow reader had not read yet: it never waited for a reader.
        #expect(slow.reader.lappedFrames > 0, "six slots cannot hold what a slow reader misses")
        #expect(daemon.status?.counters.framesPublished == 90)
        #expect(daemon.status?.counters.framesDropped == 0)

        // A reader attaching afresh sees the newest frame.
        var pixels: [UInt8] = []
        let late = try FrameRingReader(shmName: daemon.shmName)
        guard case .frame(let newest) = late.read(sequence: 90, into: &pixels) else {
            Issue.record("newest frame not readable")
            return
        }
        #expect(PlanarConversion.planar(pixels, layout: newest.layout) == reference[89])

        // The daemon restarts; an attached reader carries on without re-attaching, numbering continues.
        let survivor = try CheckingReader(shmName: daemon.shmName, delayMicroseconds: 0, reference: reference, after: 90)
        let epoch = survivor.reader.status.writerEpoch
        #expect(daemon.stop() == 0)
        #expect(survivor.reader.status.state == .stopped)
        survivor.start(until: 90)
        try daemon.start()
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2_000)
        survivor.join()
        #expect(survivor.mismatches == 0)
        #expect(survivor.lastSequence == 180)
        #expect(UInt64(survivor.accepted) + survivor.reader.lappedFrames == 90)
        #expect(survivor.reader.status.writerEpoch != epoch)
        #expect(daemon.log.contains("took over the frame ring"))
    }
}
