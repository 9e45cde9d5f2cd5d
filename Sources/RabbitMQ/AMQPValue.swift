package import Foundation

/// A value in an AMQP 0-9-1 field table: queue arguments, message headers, `x-death` entries.
///
/// Decoding maps the wire's narrower kinds onto these cases: 8/16/32-bit signed and 8/16-bit
/// unsigned integers become ``int32(_:)``, unsigned 32/64-bit integers become ``int64(_:)``,
/// `float` and `decimal` become ``double(_:)``. Integer literals encode as ``int64(_:)``.
package enum AMQPValue: Sendable, Hashable {
    case string(String)
    case bool(Bool)
    case int32(Int32)
    case int64(Int64)
    case double(Double)
    /// Whole seconds since 1970 on the wire.
    case timestamp(Date)
    case array([AMQPValue])
    case table([String: AMQPValue])
    case bytes([UInt8])
    case void

    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The value of an integer case (``int32(_:)`` or ``int64(_:)``).
    package var intValue: Int? {
        switch self {
        case .int32(let value): Int(value)
        case .int64(let value): Int(value)
        default: nil
        }
    }

    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var arrayValue: [AMQPValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    package var tableValue: [String: AMQPValue]? {
        if case .table(let value) = self { return value }
        return nil
    }

    package var dateValue: Date? {
        if case .timestamp(let value) = self { return value }
        return nil
    }
}

extension AMQPValue: ExpressibleByStringLiteral {
    package init(stringLiteral value: String) { self = .string(value) }
}

extension AMQPValue: ExpressibleByBooleanLiteral {
    package init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension AMQPValue: ExpressibleByIntegerLiteral {
    package init(integerLiteral value: Int64) { self = .int64(value) }
}

extension AMQPValue: ExpressibleByFloatLiteral {
    package init(floatLiteral value: Double) { self = .double(value) }
}

extension AMQPValue: ExpressibleByArrayLiteral {
    package init(arrayLiteral elements: AMQPValue...) { self = .array(elements) }
}

extension AMQPValue: ExpressibleByDictionaryLiteral {
    package init(dictionaryLiteral elements: (String, AMQPValue)...) {
        self = .table(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension AMQPValue: ExpressibleByNilLiteral {
    package init(nilLiteral: ()) { self = .void }
}
