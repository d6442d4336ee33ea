import Foundation
import Glibc
@testable import SharedFrames
import Testing

/// The names new ring objects have until they are renamed onto the ring's: whose they are, read back from NAME's
/// end so that dotted ring names are never confused, and when one is a leftover a new writer may remove.
struct TemporaryObjectNameTests {
    @Test func aFreshNameIsThisProcesssAndNotALeftover() throws {
        for ring in ["cam", "cam.1", "a.b.c", "streamrecv-desk"] {
            let name = TemporaryObjectName.make(for: ring)
            #expect(name.hasPrefix(".\(ring).\(getpid()).i") && name.hasSuffix(".new"))
            let parsed = try #require(TemporaryObjectName.parse(name, of: ring), "\(name)")
            #expect(parsed == TemporaryObjectName(pid: getpid(), instance: TemporaryObjectName.ownInstance))
            #expect(!parsed.isLeftover)
        }
    }

    /// `cam.99999`'s temporary objects are never `cam`'s of PID 99999, and other rings' are nobody's here.
    @Test func anotherRingsNamesAreNotThisRings() {
        let dotted = ".cam.99999.\(getpid()).i1f.42.new"
        #expect(TemporaryObjectName.parse(dotted, of: "cam") == nil)
        #expect(TemporaryObjectName.parse(dotted, of: "cam.99999") == TemporaryObjectName(pid: getpid(), instance: 0x1f))
        #expect(TemporaryObjectName.parse(".camera.12.i1.42.new", of: "cam") == nil)
        #expect(TemporaryObjectName.parse("cam.12.i1.42.new", of: "cam") == nil)
    }

    @Test(arguments: [".cam.abc.i1.2.new", ".cam.0.i1.2.new", ".cam.-5.i1.2.new", ".cam.12.ixyz.2.new", ".cam.12.i1.x.new",
                      ".cam.12.1f.2.new", ".cam.12.i1.2.old", ".cam.12.new", ".cam.12.i1.2.3.new", ".cam.12.x.new", ".cam..new"])
    func whatIsNotATemporaryNameIsNobodys(file: String) {
        #expect(TemporaryObjectName.parse(file, of: "cam") == nil)
    }

    /// The earlier versions' `.NAME.PID.RANDOM.new` is read too, as another process's (this one never makes it).
    @Test func anEarlierVersionsNameWithThisPIDIsALeftover() throws {
        let parsed = try #require(TemporaryObjectName.parse(".cam.\(getpid()).12345.new", of: "cam"))
        #expect(parsed.instance == nil && parsed.isLeftover)
        // This PID's name from another instance: a process that had this PID before (PID 1 in a container).
        let other = TemporaryObjectName.ownInstance == 1 ? 2 : 1
        #expect(TemporaryObjectName(pid: getpid(), instance: UInt64(other)).isLeftover)
    }

    @Test func aNameOfAProcessThatIsGoneIsALeftoverAndOfOneAliveIsNot() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        #expect(TemporaryObjectName(pid: child.processIdentifier, instance: 7).isLeftover)
        #expect(!TemporaryObjectName(pid: getppid(), instance: 7).isLeftover, "the parent is alive")
    }
}
