import Foundation
import Glibc
import StreamrecvTestSupport

/// Other hosts for a test: a network namespace joined to this one by a veth pair, this side 198.18.N.1/24 (the
/// benchmarking range, RFC 2544: nobody's real network) and the namespace side holding `hosts` addresses in each of
/// `networks` /24s (198.18.N.2… first, then 198.19.N+1.2…, routed over the pair), each a host of its own as the
/// daemon sees it. Removed with the value.
final class TestNetwork {
    let name: String
    let localAddress: String
    /// By network, then host.
    let networks: [[String]]
    var hostAddresses: [String] { networks.flatMap { $0 } }

    init(hosts: Int, networks count: Int = 1) throws {
        let tag = UInt16.random(in: 0...UInt16.max)
        let subnet = Int(tag % 200) + 20
        name = "srtest\(getpid() % 10_000)n\(tag)"
        localAddress = "198.18.\(subnet).1"
        let prefixes = ["198.18.\(subnet)"] + (1..<max(count, 1)).map { "198.19.\(subnet + $0)" }
        networks = prefixes.map { prefix in (0..<hosts).map { "\(prefix).\($0 + 2)" } }
        let (outside, inside) = ("sro\(tag)", "sri\(tag)")
        try runChecked("ip", ["netns", "add", name])
        do {
            try runChecked("ip", ["link", "add", outside, "type", "veth", "peer", "name", inside, "netns", name])
            try runChecked("ip", ["addr", "add", "\(localAddress)/24", "dev", outside])
            try runChecked("ip", ["link", "set", outside, "up"])
            for prefix in prefixes.dropFirst() { try runChecked("ip", ["route", "add", "\(prefix).0/24", "dev", outside]) }
            // One `ip -batch` for every address: a few hundred separate runs took seconds.
            let batch = hostAddresses.map { "addr add \($0)/24 dev \(inside)" }.joined(separator: "\n") + "\n"
            try runChecked("ip", ["netns", "exec", name, "ip", "-batch", "-"], input: Data(batch.utf8))
            try runChecked("ip", ["netns", "exec", name, "ip", "link", "set", inside, "up"])
            try runChecked("ip", ["netns", "exec", name, "ip", "link", "set", "lo", "up"])
        } catch {
            _ = try? runProcess("ip", ["netns", "del", name])
            throw error
        }
    }

    deinit { _ = try? runProcess("ip", ["netns", "del", name]) }

    /// A shell command line that runs `arguments` in the namespace.
    func command(_ arguments: [String]) -> String {
        (["ip", "netns", "exec", name] + arguments).map(shellQuoted).joined(separator: " ")
    }
}

func shellQuoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
