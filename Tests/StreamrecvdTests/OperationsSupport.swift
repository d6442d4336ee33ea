import CFrameRing
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport

/// A throwaway local user (useradd), removed when the test is done: the local attacker, or a service user.
final class ThrowawayUser {
    let name: String
    let uid: UInt32

    init() throws {
        name = "srt\(getpid() % 100_000)x\(UInt16.random(in: 0...9999))"
        try runChecked("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
        guard let entry = getpwnam(name) else { throw HarnessError(description: "useradd made no \(name)") }
        uid = entry.pointee.pw_uid
    }

    deinit { _ = try? runProcess("userdel", [name]) }

    /// The arguments that run a program as this user (no groups, no privileges).
    func command(_ executable: String, _ arguments: [String]) -> [String] {
        ["--reuid", name, "--regid", name, "--clear-groups", "--", executable] + arguments
    }

    /// Runs a program as this user to completion.
    func run(_ executable: String, _ arguments: [String]) throws -> ProcessResult {
        try runProcess("setpriv", command(executable, arguments))
    }

    /// Runs a short Python program as this user.
    func python(_ program: String) throws -> ProcessResult {
        try run("/usr/bin/python3", ["-c", program])
    }
}

/// Resident memory of a process in kB.
func residentKilobytes(_ pid: pid_t) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
}

/// Inode of what /dev/shm/NAME is now.
func objectInode(_ name: String) -> UInt? {
    var status = stat()
    return lstat("/dev/shm/" + name, &status) == 0 ? UInt(status.st_ino) : nil
}

/// Owner and mode of /dev/shm/NAME.
func objectOwnerAndMode(_ name: String) -> (uid: UInt32, mode: UInt32)? {
    var status = stat()
    return lstat("/dev/shm/" + name, &status) == 0 ? (status.st_uid, status.st_mode & 0o7777) : nil
}

/// Whether a finished process ended by a signal (a crash: SIGBUS, SIGSEGV, SIGFPE, SIGTRAP, SIGILL) rather than
/// an exit of its own.
func crashed(_ process: Process) -> Bool {
    process.terminationReason == .uncaughtSignal
}

/// A process started in the background whose end, and whether it crashed, the test reads later.
final class WatchedProcess {
    let process = Process()
    private let errorURL: URL

    init(_ executable: String, _ arguments: [String]) throws {
        errorURL = try TestEnvironment.temporaryDirectory().appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: errorURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// What it has written to standard error so far.
    var errorsSoFar: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }

    /// Waits up to `seconds` (then SIGTERM) for the end: exit status, whether a signal ended it, what it said.
    func finish(within seconds: Double) -> (status: Int32, crashed: Bool, errors: String) {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return (process.terminationStatus, crashed(process), (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "")
    }
}

/// Runs a process to completion and says whether it crashed: `runProcess` reports status only.
func runWatched(_ executable: String, _ arguments: [String], seconds: Double = 20) throws -> (status: Int32, crashed: Bool, errors: String) {
    try WatchedProcess(executable, arguments).finish(within: seconds)
}

/// Writes frame 2 into slot 1 of a ring made by `forgeRing`, forged by `forge`, and makes it the latest.
func publishForgedFrame(two name: String, forge: (UnsafeMutablePointer<streamrecv_shm_header>, UnsafeMutablePointer<streamrecv_shm_slot>) -> Void) throws {
    let descriptor = open("/dev/shm/" + name, O_RDWR)
    guard descriptor >= 0 else { throw HarnessError(description: "cannot open \(name)") }
    defer { close(descriptor) }
    var header = streamrecv_shm_header()
    var slot = streamrecv_shm_slot()
    _ = pread(descriptor, &header, MemoryLayout.size(ofValue: header), 0)
    let first = off_t(STREAMRECV_SHM_HEADER_SIZE)
    _ = pread(descriptor, &slot, MemoryLayout.size(ofValue: slot), first)
    slot.sequence = 2
    forge(&header, &slot)
    _ = pwrite(descriptor, &slot, MemoryLayout.size(ofValue: slot), first + off_t(STREAMRECV_SHM_SLOT_SIZE))
    var latest: UInt64 = 2
    _ = pwrite(descriptor, &latest, 8, off_t(MemoryLayout<streamrecv_shm_header>.offset(of: \.latest_sequence)!))
}

/// A ring laid out by hand, valid as the ABI says, with one published 64x16 gray frame; `forge` then changes what
/// an attacker would. Written to /dev/shm/NAME and given to `owner`.
func forgeRing(_ name: String, owner: UInt32? = nil, streamName: String = "forged",
               forge: (UnsafeMutablePointer<streamrecv_shm_header>, UnsafeMutablePointer<streamrecv_shm_slot>) -> Void = { _, _ in },
               truncateTo size: Int? = nil) throws {
    let slotCount = 2
    let dataOffset = 8192
    let stride = 4096
    let total = dataOffset + slotCount * stride
    var bytes = [UInt8](repeating: 0, count: total)
    bytes.withUnsafeMutableBytes { raw in
        let header = raw.baseAddress!.assumingMemoryBound(to: streamrecv_shm_header.self)
        header.pointee.magic = STREAMRECV_SHM_MAGIC
        header.pointee.abi_version = STREAMRECV_SHM_ABI_VERSION
        header.pointee.header_size = STREAMRECV_SHM_HEADER_SIZE
        header.pointee.slot_size = STREAMRECV_SHM_SLOT_SIZE
        header.pointee.slot_count = UInt32(slotCount)
        header.pointee.slot_table_offset = UInt64(STREAMRECV_SHM_HEADER_SIZE)
        header.pointee.slot_data_offset = UInt64(dataOffset)
        header.pointee.slot_data_stride = UInt64(stride)
        header.pointee.slot_data_capacity = UInt64(stride)
        header.pointee.total_size = UInt64(total)
        header.pointee.stream_state = StreamState.streaming.rawValue
        header.pointee.latest_sequence = 1
        header.pointee.writer_pid = UInt32(getpid())
        withUnsafeMutableBytes(of: &header.pointee.stream_name) { name in
            for (index, byte) in streamName.utf8.prefix(63).enumerated() { name[index] = byte }
        }
        let slot = (raw.baseAddress! + Int(STREAMRECV_SHM_HEADER_SIZE)).assumingMemoryBound(to: streamrecv_shm_slot.self)
        slot.pointee.seqlock = 2
        slot.pointee.sequence = 1
        slot.pointee.pixel_format = STREAMRECV_PIXEL_FORMAT_GRAY8.rawValue
        slot.pointee.plane_count = 1
        slot.pointee.width = 64
        slot.pointee.height = 16
        slot.pointee.bits_per_sample = 8
        slot.pointee.plane_stride.0 = 64
        slot.pointee.plane_width.0 = 64
        slot.pointee.plane_height.0 = 16
        slot.pointee.data_size = 1024
        forge(header, slot)
    }
    let path = "/dev/shm/" + name
    let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
    guard descriptor >= 0 else { throw HarnessError(description: "cannot create \(path)") }
    defer { close(descriptor) }
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    if let size { ftruncate(descriptor, off_t(size)) }
    fchmod(descriptor, 0o644)
    if let owner { fchown(descriptor, owner, owner) }
}

/// The C example consumer, compiled once per test run.
func consumerExample() throws -> String {
    let binary = TestEnvironment.temporaryRoot.appendingPathComponent("consumer-example").path
    if !FileManager.default.fileExists(atPath: binary) {
        let root = TestEnvironment.repositoryRoot
        try runChecked("cc", ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I",
                              root.appendingPathComponent("Sources/CFrameRing/include").path,
                              root.appendingPathComponent("docs/examples/consumer.c").path, "-o", binary])
    }
    return binary
}

/// The Python reader's package folder: `python3 FOLDER NAME …` runs its command line (`python -m streamrecv`).
let pythonReader = TestEnvironment.repositoryRoot.appendingPathComponent("python/streamrecv").path
