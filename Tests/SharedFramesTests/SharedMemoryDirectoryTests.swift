import Foundation
import SharedFrames
import Testing

/// Listing /dev/shm: entries are as long as their names, and the listing reads no further (a daemon given a hundred
/// WHIP streams crashed in readdir's buffer when it copied each whole 256-byte name field; ASAN sees the overread).
struct SharedMemoryDirectoryTests {
    @Test func everyNameOfEveryLengthIsListedWhole() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("shmnames-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Several of libc's 32 KiB readdir buffers, with every name length from 1 to 255 so that some entry ends
        // each buffer at every offset the names allow.
        var written: Set<String> = []
        for index in 0..<1500 {
            let length = 1 + index % 255
            let stem = String(index)
            let name = length <= stem.count ? stem : stem + "-" + String(repeating: "n", count: max(0, length - stem.count - 1))
            written.insert(name)
        }
        for name in written { #expect(FileManager.default.createFile(atPath: folder + "/" + name, contents: nil)) }
        let listed = SharedMemoryDirectory.names(in: folder)
        #expect(Set(listed) == written.union([".", ".."]))
        #expect(listed.count == written.count + 2)
        #expect(SharedMemoryDirectory.names(in: folder + "/absent").isEmpty)
    }
}
