/// Why a NAL unit, parameter set or SEI message could not be parsed. Small and typed: callers count
/// and log these; none of them is fatal to a stream.
public enum BitstreamError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The RBSP ended before a syntax element was complete.
    case truncated(element: StaticString)
    /// A syntax element is outside the range the spec (or a hard limit of ours) allows.
    case outOfRange(element: StaticString, value: Int64)
    /// `forbidden_zero_bit` is set, or the NAL unit is too short to hold its header.
    case invalidNALUnitHeader
    /// A parameter set or slice refers to a parameter set that has not been received.
    case missingParameterSet(kind: ParameterSetKind, id: Int)
    /// The syntax is valid but describes something this receiver does not handle.
    case unsupported(StaticString)

    public var description: String {
        switch self {
        case .truncated(let element): return "truncated before \(element)"
        case .outOfRange(let element, let value): return "\(element) out of range (\(value))"
        case .invalidNALUnitHeader: return "invalid NAL unit header"
        case .missingParameterSet(let kind, let id): return "refers to missing \(kind) \(id)"
        case .unsupported(let what): return "unsupported: \(what)"
        }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.description == rhs.description }
    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}

/// The kinds of parameter set the store keeps.
public enum ParameterSetKind: String, Sendable, Hashable {
    case vps, sps, pps
}
