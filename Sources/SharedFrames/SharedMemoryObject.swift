import CFrameRing
import Glibc

/// Why a shared-memory object could not be created, opened or used.
public struct SharedMemoryError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var name: String
    public var errno: Int32
    public var detail: String?

    public var description: String {
        var text = "\(operation) /dev/shm/\(name): \(String(cString: strerror(errno)))"
        if let detail { text += " (\(detail))" }
        return text
    }
}

/// One mapped POSIX shared-memory object. Owns its descriptor and mapping; `deinit` unmaps and closes.
/// The mapping is only reachable through `withMapping`, so no pointer outlives the object.
final class SharedMemoryObject {
    let name: String
    let size: Int
    let writable: Bool
    private let descriptor: Int32
    private let base: UnsafeMutableRawPointer

    private init(name: String, size: Int, writable: Bool, descriptor: Int32, base: UnsafeMutableRawPointer) {
        self.name = name
        self.size = size
        self.writable = writable
        self.descriptor = descriptor
        self.base = base
    }

    deinit {
        munmap(base, size)
        close(descriptor)
    }

    /// Opens (creating when absent) `/dev/shm/name` read-write with exactly `size` bytes, every page pre-faulted
    /// so that publishing a frame never takes a page fault. `existingSize` reports the size it had (0 if new).
    static func openForWriting(
        name: String, size: Int, mode: mode_t, group: gid_t?
    ) throws(SharedMemoryError) -> (object: SharedMemoryObject, existingSize: Int) {
        let descriptor = shm_open("/" + name, O_RDWR | O_CREAT | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw SharedMemoryError(operation: "shm_open", name: name, errno: errno) }
        // One writer per ring: the lock lives as long as the descriptor, so a crashed daemon never leaves it held.
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(
                operation: "lock", name: name, errno: error,
                detail: error == EWOULDBLOCK ? "another streamrecvd is writing this ring" : nil)
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(operation: "fstat", name: name, errno: error)
        }
        let existingSize = Int(status.st_size)
        // The umask may have narrowed the creation mode; the configured mode and group are what readers rely on.
        if fchmod(descriptor, mode) != 0 || (group.map { fchown(descriptor, UInt32.max, $0) != 0 } ?? false) {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(operation: "set mode/group of", name: name, errno: error)
        }
        if existingSize != size {
            guard ftruncate(descriptor, off_t(size)) == 0 else {
                let error = errno
                close(descriptor)
                throw SharedMemoryError(operation: "ftruncate", name: name, errno: error,
                                        detail: error == ENOSPC || error == EFBIG ? "is /dev/shm full?" : nil)
            }
        }
        // tmpfs allocates on first touch; reserve every page now so a full /dev/shm fails here, not mid-stream.
        let reserved = posix_fallocate(descriptor, 0, off_t(size))
        guard reserved == 0 else {
            close(descriptor)
            throw SharedMemoryError(
                operation: "reserve \(size) bytes for", name: name, errno: reserved, detail: "is /dev/shm full?")
        }
        guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, descriptor, 0),
              base != MAP_FAILED else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(operation: "mmap", name: name, errno: error)
        }
        return (SharedMemoryObject(name: name, size: size, writable: true, descriptor: descriptor, base: base), existingSize)
    }

    /// Maps an existing object read-only (readers never write to the ring).
    static func openForReading(name: String) throws(SharedMemoryError) -> SharedMemoryObject {
        let descriptor = shm_open("/" + name, O_RDONLY | O_CLOEXEC, 0)
        guard descriptor >= 0 else { throw SharedMemoryError(operation: "shm_open", name: name, errno: errno) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_size >= Int(STREAMRECV_SHM_HEADER_SIZE) else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(operation: "open", name: name, errno: error == 0 ? EINVAL : error,
                                    detail: "smaller than a streamrecv header")
        }
        let size = Int(status.st_size)
        guard let base = mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0), base != MAP_FAILED else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(operation: "mmap", name: name, errno: error)
        }
        return SharedMemoryObject(name: name, size: size, writable: false, descriptor: descriptor, base: base)
    }

    /// Inode of the object now behind the name, to tell whether it was replaced (nil when it is gone).
    static func currentInode(name: String) -> UInt? {
        let descriptor = shm_open("/" + name, O_RDONLY | O_CLOEXEC, 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        return fstat(descriptor, &status) == 0 ? UInt(status.st_ino) : nil
    }

    var inode: UInt {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? UInt(status.st_ino) : 0
    }

    /// Current size of the object behind our descriptor (someone else may have truncated it).
    var currentSize: Int {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? Int(status.st_size) : 0
    }

    func withMapping<Result>(_ body: (UnsafeMutableRawPointer) throws -> Result) rethrows -> Result {
        try body(base)
    }

    static func unlink(name: String) {
        shm_unlink("/" + name)
    }
}
