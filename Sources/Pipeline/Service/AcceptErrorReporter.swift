import CoreMetrics
import Decoding
import Logging
import NIOCore
import SharedFrames

/// Reports accept(2) failures on a listening socket (EMFILE when the process is out of descriptors, ENFILE, ENOMEM)
/// at most once per 10 s with a count, and swallows them. NIO's `AcceptBackoffHandler` in front of it pauses
/// accepting for a second after each failure: without it the event loop spins on a socket that stays readable.
final class AcceptErrorReporter: ChannelInboundHandler {
    typealias InboundIn = Channel
    typealias InboundOut = Channel

    private let listener: String
    private let counter: Counter
    private var log: RateLimitedLogger

    init(listener: String, counter: Counter, logger: Logger) {
        self.listener = listener
        self.counter = counter
        log = RateLimitedLogger(logger: logger)
    }

    /// The two handlers a listening socket gets, in order.
    static func handlers(listener: String, counter: Counter, logger: Logger) -> [ChannelHandler] {
        [AcceptBackoffHandler(shouldForwardIOErrorCaught: true), AcceptErrorReporter(listener: listener, counter: counter, logger: logger)]
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        counter.increment()
        log.log(.error, key: "accept", now: MonotonicClock.nanoseconds(),
                "\(listener): cannot accept connections: \(error); pausing accepts for 1 s")
    }
}
