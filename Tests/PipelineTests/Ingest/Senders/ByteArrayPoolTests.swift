import NIOCore
@testable import Pipeline
import Testing

@Suite struct ByteArrayPoolTests {
    @Test func arraysComeBackWithTheirStorageAndThePoolIsBounded() {
        let pool = ByteArrayPool()
        // Handed over and given back as the decode thread does: nothing else holds it afterwards.
        let storage: UnsafePointer<UInt8>? = {
            let first = pool.copy(ByteBuffer(bytes: [1, 2, 3]))
            #expect(first == [1, 2, 3])
            pool.recycle(first)
            return first.withUnsafeBufferPointer { $0.baseAddress }
        }()
        let second = pool.copy(ByteBuffer(bytes: [4, 5]))
        #expect(second == [4, 5])
        #expect(second.withUnsafeBufferPointer { $0.baseAddress } == storage, "the recycled storage is reused")
        // More arrays than the pool keeps, and one too large to keep: none of it grows the pool past its bounds.
        for _ in 0..<(ByteArrayPool.capacity + 4) { pool.recycle([UInt8](repeating: 7, count: 16)) }
        pool.recycle([UInt8](repeating: 0, count: ByteArrayPool.largestKept + 1))
        var taken: [[UInt8]] = []
        for _ in 0..<(ByteArrayPool.capacity + 1) { taken.append(pool.copy(ByteBuffer(bytes: [9]))) }
        #expect(taken.filter { $0.capacity > ByteArrayPool.largestKept }.isEmpty)
        #expect(taken.allSatisfy { $0 == [9] })
    }
}
