import FrameExport
import FrameFormats
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import SharedFrames

/// GET and HEAD on the WHIP port: the share page (`SharePage.html`), the list of streams that take WebRTC, and each
/// stream's newest decoded frame, so that whoever shares sees what the daemon got. The page and the list are public
/// (they name streams, nothing more); a frame is the shared screen itself, so it needs the stream's bearer token and
/// an address its `allow` list admits, exactly as a WHIP offer does.
///
///     GET /  and  GET /share       the page (inline CSS and JS, nothing fetched from elsewhere)
///     GET /streams.json            [{"name": NAME, "whip": "/whip/NAME"}, …]
///     GET /whip/NAME/frame.png     the newest frame as a PNG; X-Frame-* headers say what it is
enum SharePageRoutes {
    /// The page may run scripts and styles of its own and show images it fetched (blob:), nothing else; no other
    /// site may frame it (a page that starts screen sharing must not be clickjacked).
    static let contentSecurityPolicy = "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'; "
        + "img-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

    private static let page = ByteBuffer(bytes: SharePage.html)

    /// Answers `request` if its path is one of ours and returns true; returns false to leave it to the WHIP handler
    /// (its 404 for other paths, its 405 for GET of a WHIP resource). Runs on the session table's loop; a frame's
    /// answer is written later, from there too, once the frame is encoded.
    static func serve(
        _ request: HTTPRequestHead, table: WebRTCSessionTable, channel: Channel, remote: SocketAddress?,
        authorized: (HTTPHeaders, WebRTCRoute) -> Bool
    ) -> Bool {
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        switch path {
        case "/", "/share":
            write(.ok, page, contentType: "text/html; charset=utf-8", for: request, channel: channel,
                  headers: [("Content-Security-Policy", contentSecurityPolicy), ("Cache-Control", "no-cache"),
                            ("Referrer-Policy", "no-referrer")])
        case "/streams.json":
            write(.ok, ByteBuffer(string: streamList(table.routes)), contentType: "application/json", for: request, channel: channel)
        default:
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0].isEmpty, parts[1] == "whip", !parts[2].isEmpty, parts[3] == "frame.png" else {
                return false
            }
            frame(of: String(parts[2]), request, table: table, channel: channel, remote: remote, authorized: authorized)
        }
        return true
    }

    /// Every stream that takes WebRTC, by name. Names are [A-Za-z0-9_-] by the configuration's rules; escaped all the
    /// same, so that the list stays JSON whatever a later rule allows.
    static func streamList(_ routes: [String: WebRTCRoute]) -> String {
        let entries = routes.keys.sorted().map { name in
            let quoted = jsonString(name)
            let bitrate = routes[name]?.settings.maximumBitrate ?? WebRTCSettings.sharePageDefaultBitrate
            return "{\"name\":\(quoted),\"whip\":\(jsonString("/whip/" + name)),\"maxBitrate\":\(bitrate)}"
        }
        return "[" + entries.joined(separator: ",") + "]\n"
    }

    private static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20 || scalar == "<" || scalar == ">" || scalar == "&":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func frame(
        of name: String, _ request: HTTPRequestHead, table: WebRTCSessionTable, channel: Channel, remote: SocketAddress?,
        authorized: (HTTPHeaders, WebRTCRoute) -> Bool
    ) {
        guard let route = table.routes[name] else {
            return write(.notFound, text: "no WebRTC stream named '\(printable(name))'\n", for: request, channel: channel)
        }
        guard route.configuration.allow.allows(remote) else {
            return write(.forbidden, text: "this address is not in the stream's allow list\n", for: request, channel: channel)
        }
        guard authorized(request.headers, route) else {
            // Counted and logged as a WHIP request's wrong token is: guessing through this door is the same attack.
            table.metrics.refused(.token)
            route.metrics.refused(.token)
            table.logRefusal(key: "token", now: MonotonicClock.nanoseconds(),
                             "frame request for stream \(name) refused: missing or wrong bearer token (remote \(remote?.description ?? "unknown"))")
            return write(.unauthorized, text: "a valid bearer token is needed (Authorization: Bearer …)\n", for: request, channel: channel,
                         headers: [("WWW-Authenticate", "Bearer realm=\"streamrecvd\"")])
        }
        let live = Set(table.routes.values.map(\.configuration.shmName))
        let image = FrameImages.shared.newest(shmName: route.configuration.shmName, live: live, eventLoop: channel.eventLoop)
        image.whenSuccess { outcome in
            switch outcome {
            case .image(let image):
                write(.ok, image.png, contentType: "image/png", for: request, channel: channel, headers: frameHeaders(image.info))
            case .noFrame(let reason):
                write(.notFound, text: "stream \(name) has no decoded frame yet (\(reason)): start sharing, the picture follows\n",
                      for: request, channel: channel)
            case .unreadable(let reason):
                write(.serviceUnavailable, text: "the newest frame of stream \(name) cannot be shown: \(reason)\n",
                      for: request, channel: channel)
            }
        }
    }

    /// What the page shows beside the picture. Ages are taken when the answer is written, on the daemon's clock (the
    /// one the decoder stamped the frame with), so the page's own clock does not matter.
    static func frameHeaders(_ info: FrameInfo) -> [(String, String)] {
        let now = MonotonicClock.nanoseconds()
        var flags: [String] = []
        if info.flags.contains(.keyframe) { flags.append("keyframe") }
        if info.flags.contains(.corrupt) { flags.append("corrupt") }
        if info.flags.contains(.discontinuity) { flags.append("discontinuity") }
        // Saturating: a frame stamped by another process's clock (a ring taken over) must not trap or wrap.
        let age = now > info.timePublished ? (now - info.timePublished) / 1_000_000 : 0
        var headers = [
            ("X-Frame-Width", String(info.layout.width)), ("X-Frame-Height", String(info.layout.height)),
            ("X-Frame-Sequence", String(info.sequence)), ("X-Frame-Flags", flags.isEmpty ? "none" : flags.joined(separator: ",")),
            ("X-Frame-Format", info.layout.format.description), ("X-Frame-Age-Ms", String(age)),
        ]
        // From the access unit's first byte to the frame's publication: the daemon's own share of the latency.
        if info.timeFirstByte > 0, info.timePublished > info.timeFirstByte {
            headers.append(("X-Frame-Pipeline-Ms", String((info.timePublished - info.timeFirstByte) / 1_000_000)))
        }
        return headers
    }

    private static func write(
        _ status: HTTPResponseStatus, text: String, for request: HTTPRequestHead, channel: Channel, headers: [(String, String)] = []
    ) {
        write(status, ByteBuffer(string: text), contentType: "text/plain; charset=utf-8", for: request, channel: channel, headers: headers)
    }

    /// Through the channel, not a handler context: a frame's answer is written after the request's turn on the loop.
    /// HTTPServerPipelineHandler holds back the next request of a keep-alive connection until this one's `.end`.
    private static func write(
        _ status: HTTPResponseStatus, _ body: ByteBuffer, contentType: String, for request: HTTPRequestHead, channel: Channel,
        headers extra: [(String, String)] = []
    ) {
        var headers = HTTPHeaders(extra)
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        if !headers.contains(name: "Cache-Control") { headers.add(name: "Cache-Control", value: "no-store") }
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: status, headers: headers)), promise: nil)
        if request.method != .HEAD, body.readableBytes > 0 { channel.write(HTTPServerResponsePart.body(.byteBuffer(body)), promise: nil) }
        let done = channel.writeAndFlush(HTTPServerResponsePart.end(nil))
        if !keepAlive { done.whenComplete { _ in channel.close(promise: nil) } }
    }

    /// A stream name from a URL, safe in a reply.
    private static func printable(_ text: String) -> String {
        String(text.unicodeScalars.prefix(64).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f ? Character($0) : "?" })
    }
}

/// Each stream's newest frame as a PNG, made off the event loop (a 1080p PNG is ~60 ms of a core, and the loop also
/// carries every WebRTC datagram), one encode at a time per stream: requests that arrive meanwhile wait for that
/// encode, and a frame already encoded is served again without a new one. Process-wide because a ring is: every
/// connection of every page reads the same object, and the handler that serves them lives per connection.
final class FrameImages: Sendable {
    static let shared = FrameImages()
    /// A stream whose picture nobody asked for in this long lets go of its ring's mapping and its last PNG.
    static let idleNanoseconds: UInt64 = 60_000_000_000

    struct Image: Sendable {
        let info: FrameInfo
        let png: ByteBuffer
    }

    enum Outcome: Sendable {
        case image(Image)
        /// Nothing to show yet: the ring is not there or holds no frame.
        case noFrame(String)
        /// The ring is there but its newest frame could not be read or encoded.
        case unreadable(String)
    }

    private struct Entry {
        var reader: FrameRingReader?
        var image: Image?
        /// Not empty while an encode runs: the requests it answers.
        var waiting: [EventLoopPromise<Outcome>] = []
        var lastUsed: UInt64
    }

    private let entries = NIOLockedValueBox([String: Entry]())

    /// The newest frame of ring `shmName`. `live`: the rings of the streams that take WebRTC now; others are let go.
    /// Lets go of the readers and images of rings that are no longer a stream's (a reload removed it) or that
    /// nobody asked for in `idleNanoseconds`; called every second by the server, so that a ring removed from
    /// /dev/shm is not kept mapped until someone happens to ask for another frame.
    func prune(live: Set<String>) {
        let now = MonotonicClock.nanoseconds()
        entries.withLockedValue { Self.keepLive(&$0, live: live, now: now) }
    }

    private static func keepLive(_ entries: inout [String: Entry], live: Set<String>, now: UInt64) {
        entries = entries.filter { key, entry in
            !entry.waiting.isEmpty || (live.contains(key) && now &- entry.lastUsed < idleNanoseconds)
        }
    }

    func newest(shmName: String, live: Set<String>, eventLoop: EventLoop) -> EventLoopFuture<Outcome> {
        let promise = eventLoop.makePromise(of: Outcome.self)
        let now = MonotonicClock.nanoseconds()
        let start: (reader: FrameRingReader?, image: Image?)? = entries.withLockedValue { entries in
            // An entry with waiters stays whatever happened: its encode answers them.
            Self.keepLive(&entries, live: live, now: now)
            var entry = entries[shmName] ?? Entry(lastUsed: now)
            entry.lastUsed = now
            entry.waiting.append(promise)
            entries[shmName] = entry
            return entry.waiting.count == 1 ? (entry.reader, entry.image) : nil
        }
        if let start {
            runOnDedicatedThread(named: "share-frame") { [self] in
                var reader = start.reader
                let outcome = Self.encodeNewest(shmName: shmName, reader: &reader, previous: start.image)
                finish(shmName: shmName, reader: reader, outcome: outcome)
            }
        }
        return promise.futureResult
    }

    private func finish(shmName: String, reader: FrameRingReader?, outcome: Outcome) {
        let waiting = entries.withLockedValue { entries -> [EventLoopPromise<Outcome>] in
            guard var entry = entries[shmName] else { return [] }
            let waiting = entry.waiting
            entry.waiting = []
            entry.reader = reader
            if case .image(let image) = outcome { entry.image = image }
            entries[shmName] = entry
            return waiting
        }
        for promise in waiting { promise.succeed(outcome) }
    }

    /// Reads the ring's newest frame and encodes it, unless it is `previous`'s frame. Blocks for the encode.
    static func encodeNewest(shmName: String, reader: inout FrameRingReader?, previous: Image?) -> Outcome {
        if reader == nil {
            do {
                reader = try FrameRingReader(shmName: shmName)
            } catch .sharedMemory(let error) {
                return .noFrame("no frame ring yet: \(error)")
            } catch {
                return .unreadable("\(error)")
            }
        }
        guard let reader else { return .noFrame("no frame ring yet") }
        // The daemon may have put a new object under the name (a reload, a resize): read that one.
        reader.reattachIfReplaced()
        // A few tries: the writer may overwrite the newest slot while it is copied (a torn read) at 60 fps.
        for _ in 0..<8 {
            let latest = reader.latestSequence
            guard latest > 0 else { return .noFrame("nothing decoded since the stream started") }
            let read = reader.withFrame(sequence: latest) { info, bytes -> [UInt8]? in
                if let previous, previous.info.sequence == info.sequence, previous.info.timePublished == info.timePublished { return nil }
                return Array(bytes)
            }
            switch read {
            case .frame(_, nil):
                if let previous { return .image(previous) }
            case .frame(let info, let pixels?):
                do {
                    let png = try PNGSnapshot.encode(pixels, layout: info.layout, fullRange: info.colorRange == 2)
                    return .image(Image(info: info, png: ByteBuffer(bytes: png)))
                } catch {
                    return .unreadable("it cannot be made into a PNG: \(error)")
                }
            case .torn, .lapped, .notYetPublished:
                continue
            case .invalid:
                return .unreadable("the ring's newest slot holds no valid frame")
            }
        }
        return .unreadable("the newest frame kept changing while it was read")
    }
}
