/// The two codecs the receiver understands. Raw values are the names used in configuration and JSON.
public enum VideoCodec: String, Sendable, Hashable, CaseIterable {
    case h264
    case h265
}
