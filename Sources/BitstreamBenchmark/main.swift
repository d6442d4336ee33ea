// Splitting throughput of AnnexBSplitter against a memchr-based start-code scan of the same buffer, in the
// same run. Release build only; `make bench` generates the input stream and runs this.
//
//   BitstreamBenchmark FILE [MIN_MEGABYTES]
import Bitstream
import CAllocationCounter
import Glibc

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func readFile(_ path: String) -> [UInt8] {
    guard let file = fopen(path, "rb") else { fatalError("cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count == 0 { break }
        bytes.append(contentsOf: buffer[0..<count])
    }
    return bytes
}

/// Start codes found by memchr for the `01` byte and a look at the two bytes before it: the C baseline.
func memchrScan(_ buffer: [UInt8]) -> Int {
    buffer.withUnsafeBytes { raw -> Int in
        let base = raw.baseAddress!
        var offset = 2
        var found = 0
        while offset < raw.count {
            guard let hit = memchr(base + offset, 1, raw.count - offset) else { break }
            let index = base.distance(to: UnsafeRawPointer(hit))
            if raw[index - 1] == 0 && raw[index - 2] == 0 { found += 1 }
            offset = index + 1
        }
        return found
    }
}

func split(_ buffer: [UInt8], chunkSize: Int) -> (units: Int, payload: Int) {
    var splitter = AnnexBSplitter()
    var units = 0
    var payload = 0
    var offset = 0
    while offset < buffer.count {
        let end = min(offset + chunkSize, buffer.count)
        splitter.append(buffer[offset..<end]) { unit in
            units += 1
            payload &+= unit.bytes.count
        }
        offset = end
    }
    splitter.flush { unit in units += 1; payload &+= unit.bytes.count }
    return (units, payload)
}

func fixed(_ value: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = "\(rounded)"
    let fraction = text.split(separator: ".").last?.count ?? 0
    if !text.contains(".") { text += "." }
    return text + String(repeating: "0", count: max(0, digits - fraction))
}

func best(of runs: Int, _ body: () -> Void) -> Double {
    var fastest = Double.infinity
    for _ in 0..<runs {
        let start = now()
        body()
        fastest = min(fastest, now() - start)
    }
    return fastest
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: BitstreamBenchmark FILE [MIN_MEGABYTES]")
    exit(2)
}
let minimumBytes = (arguments.count > 2 ? Int(arguments[2]) ?? 256 : 256) << 20
let sample = readFile(arguments[1])
precondition(!sample.isEmpty, "empty input")
var stream: [UInt8] = []
stream.reserveCapacity(minimumBytes + sample.count)
while stream.count < minimumBytes { stream.append(contentsOf: sample) }
let megabytes = Double(stream.count) / 1e6

let expected = memchrScan(stream)
let baseline = best(of: 5) { precondition(memchrScan(stream) == expected) }
print("input: \(arguments[1]) repeated to \(stream.count) bytes, \(expected) start codes")
print("")
print("| scan | chunk | GB/s | ratio to memchr | heap allocations per NAL |")
print("|---|---|---|---|---|")
print("| C memchr start-code scan | whole buffer | \(fixed(megabytes / baseline / 1000, 2)) | 1.00 | – |")
for chunkSize in [1 << 20, 64 << 10, 1500] {
    var units = 0
    let seconds = best(of: 5) { units = split(stream, chunkSize: chunkSize).units }
    let before = streamrecv_allocation_count()
    let counted = split(stream, chunkSize: chunkSize).units
    let allocations = streamrecv_allocation_count() - before
    precondition(counted == units)
    let label = chunkSize % 1024 == 0 ? "\(chunkSize >> 10) KiB" : "\(chunkSize) B"
    print("| AnnexBSplitter (\(units) NAL units) | \(label) | \(fixed(megabytes / seconds / 1000, 2)) | \(fixed(baseline / seconds, 2)) | \(fixed(Double(allocations) / Double(units), 5)) |")
}
