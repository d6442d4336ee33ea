import CFrameRing
import CMappingGuard
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

/// Which object a name leads to: device and inode.
struct ObjectIdentity: Equatable, Sendable {
    var device: UInt
    var inode: UInt

    init(_ status: stat) {
        device = UInt(status.st_dev)
        inode = UInt(status.st_ino)
    }
}

/// What a writer finds under a ring's name.
enum ExistingObject {
    case none
    /// Created by this user: mapped read-write and write-locked by us.
    case ours(SharedMemoryObject)
    /// Created by this user but too small to hold a header (nothing to keep).
    case oursEmpty
    /// Created by another user (or not a plain file): never adopted.
    case foreign(owner: uid_t, mode: mode_t, size: Int)
}

/// One mapped POSIX shared-memory object under /dev/shm. Owns its descriptor and mapping; `deinit` unmaps and
/// closes. The mapping is guarded (`mapping_guard.h`): if another process shrinks the object, accesses land on
/// zero pages instead of killing the process, and `faulted` turns true.
// @unchecked: every stored property is a constant set in init. The mapping they describe is shared memory, written
// by one writer and read under the ring's seqlock protocol (streamrecv_shm.h), by threads and processes alike.
final class SharedMemoryObject: @unchecked Sendable {
    static let directory = "/dev/shm/"

    /// The name it was opened under, or for a new object the temporary name `install(as:)` renames.
    private let openedName: String
    let size: Int
    let writable: Bool
    let identity: ObjectIdentity
    /// The user who created it.
    let owner: UInt32
    let descriptor: Int32
    private let base: UnsafeMutableRawPointer
    private let guardNumber: Int32

    private init(name: String, size: Int, writable: Bool, descriptor: Int32, status: stat) throws(SharedMemoryError) {
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        // Writers pre-fault every page: publishing a frame never takes a page fault.
        let flags = writable ? MAP_SHARED | MAP_POPULATE : MAP_SHARED
        guard let base = mmap(nil, size, protection, flags, descriptor, 0), base != MAP_FAILED else {
            throw SharedMemoryError(operation: "mmap", name: name, errno: errno)
        }
        openedName = name
        self.size = size
        self.writable = writable
        self.descriptor = descriptor
        identity = ObjectIdentity(status)
        owner = status.st_uid
        self.base = base
        guardNumber = streamrecv_guard_register(base, size)
        guard guardNumber >= 0 else {
            // Unguarded, a shrunk object would kill the process: refuse instead (1024 mappings in one process).
            munmap(base, size)
            throw SharedMemoryError(operation: "guard", name: name, errno: EMFILE, detail: "too many rings mapped in this process")
        }
    }

    deinit {
        streamrecv_guard_unregister(guardNumber)
        munmap(base, size)
        close(descriptor)
    }

    /// True once someone shrank the object under the mapping: its contents are no longer shared.
    var faulted: Bool { streamrecv_guard_faulted(guardNumber) != 0 }

    /// Whether the object is now smaller than the mapping (someone truncated it; the next access would fault).
    var isShrunk: Bool {
        var status = stat()
        return fstat(descriptor, &status) == 0 && Int(status.st_size) < size
    }

    func withMapping<Result>(_ body: (UnsafeMutableRawPointer) throws -> Result) rethrows -> Result {
        try body(base)
    }

    /// Whether a writer holds the object (its open-file-description write lock); nil when it cannot be told.
    var writerPresent: Bool? {
        switch streamrecv_shm_writer_present(descriptor) {
        case 1: return true
        case 0: return false
        default: return nil
        }
    }

    // MARK: - Writers

    /// A new object of `size` bytes for the ring `name`, write-locked, every page reserved and mapped. It lives
    /// under a temporary name until `install(as:)`: readers never see it half made, and if anything fails here it
    /// is removed (no sparse object is left behind).
    static func create(for name: String, size: Int, mode: mode_t, group: gid_t?) throws(SharedMemoryError) -> SharedMemoryObject {
        let temporary = TemporaryObjectName.make(for: name)
        let path = directory + temporary
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw SharedMemoryError(operation: "create", name: temporary, errno: errno) }
        func fail(_ operation: String, _ error: Int32, _ detail: String? = nil) -> SharedMemoryError {
            Glibc.unlink(path)
            close(descriptor)
            return SharedMemoryError(operation: operation, name: name, errno: error, detail: detail)
        }
        guard streamrecv_shm_lock_for_writing(descriptor) == 0 else { throw fail("lock", errno) }
        // The umask may have narrowed the creation mode; the configured mode and group are what readers rely on.
        if fchmod(descriptor, mode) != 0 || (group.map { fchown(descriptor, UInt32.max, $0) != 0 } ?? false) {
            throw fail("set mode/group of", errno)
        }
        guard ftruncate(descriptor, off_t(size)) == 0 else {
            let error = errno
            throw fail("resize to \(size) bytes", error, error == ENOSPC || error == EFBIG ? "is /dev/shm full?" : nil)
        }
        // tmpfs allocates on first touch; reserve every page now so a full /dev/shm fails here, not mid-stream.
        let reserved = posix_fallocate(descriptor, 0, off_t(size))
        guard reserved == 0 else { throw fail("reserve \(size) bytes for", reserved, "is /dev/shm full?") }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw fail("fstat", errno) }
        do {
            return try SharedMemoryObject(name: temporary, size: size, writable: true, descriptor: descriptor,
                                          status: status)
        } catch {
            throw fail("mmap", error.errno)
        }
    }

    /// Puts a new object under `name`, atomically replacing whatever was there (readers of the old one see its
    /// inode change). On failure the new object is removed.
    func install(as name: String) throws(SharedMemoryError) {
        let temporary = Self.directory + openedName
        guard rename(temporary, Self.directory + name) == 0 else {
            let error = errno
            Glibc.unlink(temporary)
            throw SharedMemoryError(operation: "rename a new ring to", name: name, errno: error)
        }
    }

    /// Removes a new object that was never installed (its temporary name); the mapping lasts until `deinit`.
    func discard() {
        Glibc.unlink(Self.directory + openedName)
    }

    /// Opens the object behind `name` for writing, if it is one this user created, and takes its write lock.
    static func openExisting(name: String) throws(SharedMemoryError) -> ExistingObject {
        let path = directory + name
        let descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        var status = stat()
        guard descriptor >= 0 else {
            let error = errno
            if error == ENOENT { return .none }
            // Not writable by us (another user's object, or a link someone planted): describe it without opening.
            guard lstat(path, &status) == 0 else { throw SharedMemoryError(operation: "open", name: name, errno: error) }
            return .foreign(owner: status.st_uid, mode: status.st_mode & 0o7777, size: Int(status.st_size))
        }
        guard fstat(descriptor, &status) == 0 else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(operation: "fstat", name: name, errno: error)
        }
        if (status.st_mode & S_IFMT) != S_IFREG || status.st_uid != geteuid() {
            close(descriptor)
            return .foreign(owner: status.st_uid, mode: status.st_mode & 0o7777, size: Int(status.st_size))
        }
        // The writer's lock: unlike flock(2) it needs a descriptor open for writing, so no reader can take it; it
        // goes away with the descriptor (a crashed daemon never leaves it held).
        guard streamrecv_shm_lock_for_writing(descriptor) == 0 else {
            let error = errno
            close(descriptor)
            throw SharedMemoryError(
                operation: "lock", name: name, errno: error,
                detail: error == EAGAIN || error == EACCES ? "another streamrecvd is writing this ring" : nil)
        }
        guard Int(status.st_size) >= Int(STREAMRECV_SHM_HEADER_SIZE) else {
            close(descriptor)
            return .oursEmpty
        }
        do {
            return .ours(try SharedMemoryObject(name: name, size: Int(status.st_size), writable: true,
                                                descriptor: descriptor, status: status))
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// Removes temporary objects a crashed writer of `name` left behind (only this user's).
    static func removeLeftovers(of name: String) {
        for file in SharedMemoryDirectory.names() {
            var status = stat()
            guard let owner = TemporaryObjectName.parse(file, of: name), owner.isLeftover,
                  lstat(directory + file, &status) == 0, status.st_uid == geteuid() else { continue }
            Glibc.unlink(directory + file)
        }
    }

    // MARK: - Readers and names

    /// Maps the object behind `name` read-only (readers never write to the ring).
    static func openForReading(name: String) throws(SharedMemoryError) -> SharedMemoryObject {
        guard SharedMemoryDirectory.isPlainName(name) else {
            throw SharedMemoryError(operation: "open", name: name, errno: EINVAL, detail: "not a plain name under /dev/shm")
        }
        // O_NONBLOCK: a FIFO someone planted under the name must not hang the reader in open(2).
        let descriptor = open(directory + name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw SharedMemoryError(operation: "open", name: name, errno: errno) }
        var status = stat()
        let statted = fstat(descriptor, &status) == 0
        guard statted, (status.st_mode & S_IFMT) == S_IFREG, Int(status.st_size) >= Int(STREAMRECV_SHM_HEADER_SIZE) else {
            // errno only when fstat failed: after a success it is whatever an earlier call left.
            let error = statted ? EINVAL : errno
            close(descriptor)
            throw SharedMemoryError(operation: "open", name: name, errno: error == 0 ? EINVAL : error,
                                    detail: "not a plain object at least as large as a streamrecv header")
        }
        // A ring's pages are all reserved by its writer; a sparse object claiming terabytes is a forgery that
        // would have readers allocate what it claims.
        guard Int(status.st_blocks) * 512 >= Int(status.st_size) else {
            close(descriptor)
            throw SharedMemoryError(operation: "open", name: name, errno: EINVAL,
                                    detail: "a sparse object (\(Int(status.st_blocks) * 512) of \(status.st_size) bytes allocated): not a ring")
        }
        do {
            return try SharedMemoryObject(name: name, size: Int(status.st_size), writable: false,
                                          descriptor: descriptor, status: status)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// What `name` leads to now, found without opening it (so it works even when descriptors ran out).
    enum NameLookup: Equatable {
        case object(ObjectIdentity)
        case missing
        /// The lookup itself failed (not the same as missing: never act on it).
        case unknown
    }

    static func lookup(_ name: String) -> NameLookup {
        var status = stat()
        if lstat(directory + name, &status) == 0 { return .object(ObjectIdentity(status)) }
        return errno == ENOENT ? .missing : .unknown
    }

    /// Removes `name` if it still leads to `identity` (never someone else's object put there since).
    static func unlink(name: String, ifStill identity: ObjectIdentity) {
        if lookup(name) == .object(identity) { Glibc.unlink(directory + name) }
    }
}

/// The directory POSIX shared-memory objects live in.
public enum SharedMemoryDirectory {
    /// Whether `name` is a name in /dev/shm itself, never a path: not empty, no '/' or NUL, not '.' or '..'.
    /// O_NOFOLLOW guards only a path's last part, so a '/' could pass through a directory link another user planted
    /// there, and '..' out of it. The daemon's `shm_name`, the readers and streamrecvctl all go by this.
    public static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0) && name != "." && name != ".."
    }

    /// The names of everything in /dev/shm, or in `directory` (empty when it cannot be read).
    public static func names(in directory: String = "/dev/shm") -> [String] {
        guard let folder = opendir(directory) else { return [] }
        defer { closedir(folder) }
        // A readdir entry is only as long as its name: copying the whole 256-byte `d_name` reads past the end of
        // libc's buffer, a crash once the last entry sits at the end of a page (a hundred rings were enough).
        let nameOffset = MemoryLayout<dirent>.offset(of: \.d_name)!
        var names: [String] = []
        while let entry = readdir(folder) {
            names.append(String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self)))
        }
        return names
    }
}
