import Foundation
package import LiveDeliveryJSON

/// How `attributes` and `content-state` are built from a tracked order: a declarative list of
/// fields, each with a source, a type and (for non-optional fields whose source can be missing)
/// a default. Read from `Config/content-mapping.json` (``decode(_:file:)``) and checked there, so a
/// wrong mapping fails at start-up, never at send time.
///
/// Encoding follows what ActivityKit's default `JSONDecoder` expects: keys are the Swift property
/// names, a `Date` is seconds since 2001-01-01 (`dateEncoding: "unixSeconds"` is for apps that
/// model times as `Int` epochs), a `ClosedRange<Date>` is `[lower, upper]`.
package struct ContentMapping: Sendable, Hashable {
    /// Where a field's value comes from.
    package struct Source: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }

        enum Kind: Hashable, Sendable { case string, int, status, date, dateRange, bool }

        /// Every source: its kind, and whether it always has a value.
        static let table: [(Source, Kind, always: Bool)] = [
            (Source(rawValue: "order.order_id"), .string, true),
            (Source(rawValue: "order.user_id"), .string, true),
            (Source(rawValue: "order.status"), .status, true),
            (Source(rawValue: "order.order_number"), .int, false),
            (Source(rawValue: "order.sequence"), .int, false),
            (Source(rawValue: "order.updated_at"), .date, true),
            (Source(rawValue: "merchant.name"), .string, false),
            (Source(rawValue: "courier.name"), .string, false),
            (Source(rawValue: "courier.assigned"), .bool, true),
            (Source(rawValue: "eta"), .dateRange, false),
            (Source(rawValue: "eta.earliest"), .date, false),
            (Source(rawValue: "eta.latest"), .date, false),
            (Source(rawValue: "eta.known"), .bool, true),
        ]

        package static var known: [Source] { table.map(\.0) }
        var kind: Kind? { Self.table.first { $0.0 == self }?.1 }
        var alwaysPresent: Bool { Self.table.first { $0.0 == self }?.always ?? false }
        package var description: String { rawValue }
    }

    package enum FieldType: String, Sendable, Hashable, CaseIterable {
        case string, int, double, bool, date, dateRange, `enum`
    }

    package enum DateEncoding: String, Sendable, Hashable, CaseIterable {
        /// Swift's `Date` with a default `JSONDecoder`: seconds since 2001-01-01, a number.
        case referenceDate
        /// Whole seconds since 1970 (for `Int` epoch properties).
        case unixSeconds
    }

    package enum DefaultValue: Sendable, Hashable {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        /// A date this many seconds after the order's newest event (`order.updated_at`).
        case secondsAfterUpdate(Double)
        /// A date range this many seconds after the order's newest event.
        case rangeAfterUpdate(Double, Double)
    }

    package struct Field: Sendable, Hashable {
        /// The Swift property name (the JSON key).
        package var name: String
        /// nil: the field always takes its default (a constant).
        package var source: Source?
        package var type: FieldType
        /// Optional fields are left out when the source has no value.
        package var optional: Bool
        package var defaultValue: DefaultValue?
        package var dateEncoding: DateEncoding
        /// For `enum`: status → case. A nil case means "the case of the newest non-terminal status"
        /// (so a cancelled order keeps the step it had reached).
        package var values: [OrderStatus: String?]
        /// For `enum`: the app enum's cases, when listed; every value must be one of them.
        package var cases: [String]?
    }

    /// `attributes-type`: the Swift `ActivityAttributes` type name.
    package var attributesType: String
    package var attributes: [Field]
    package var contentState: [Field]

    package init(attributesType: String, attributes: [Field], contentState: [Field]) {
        self.attributesType = attributesType
        self.attributes = attributes
        self.contentState = contentState
    }

    /// Builds `attributes` for a start.
    package func attributes(for record: OrderRecord) -> JSONObject { build(attributes, record) }

    /// Builds `content-state`: the full state, every time.
    package func contentState(for record: OrderRecord) -> JSONObject { build(contentState, record) }

    private func build(_ fields: [Field], _ record: OrderRecord) -> JSONObject {
        var object = JSONObject()
        object.reserveCapacity(fields.count)
        for field in fields {
            if let value = value(of: field, record) {
                object[field.name] = value
            }
        }
        return object
    }

    private func value(of field: Field, _ record: OrderRecord) -> JSONValue? {
        if let source = field.source, let value = sourceValue(source, field, record) { return value }
        if field.optional && field.source != nil { return nil }
        guard let defaultValue = field.defaultValue else { return nil }
        let updated = record.newest.occurredAt
        switch defaultValue {
        case .string(let s): return .string(s)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .bool(let b): return .bool(b)
        case .secondsAfterUpdate(let s): return encode(updated.addingTimeInterval(s), field.dateEncoding)
        case .rangeAfterUpdate(let a, let b):
            return .array([
                encode(updated.addingTimeInterval(a), field.dateEncoding),
                encode(updated.addingTimeInterval(b), field.dateEncoding),
            ])
        }
    }

    private func sourceValue(_ source: Source, _ field: Field, _ record: OrderRecord) -> JSONValue? {
        switch source.rawValue {
        case "order.order_id": return .string(record.orderID)
        case "order.user_id": return .string(record.userID)
        case "order.status":
            if field.type == .enum {
                if let mapped = field.values[record.status] {
                    if let mapped { return .string(mapped) }
                    // Keep: the case of the newest non-terminal status, if it maps to one.
                    if let open = record.latestOpen?.value, case .some(.some(let kept)) = field.values[open] {
                        return .string(kept)
                    }
                }
                return nil
            }
            return .string(record.status.rawValue)
        case "order.order_number": return record.orderNumber.map { convert($0.value, field.type) }
        case "order.sequence": return record.newest.sequence.map { convert($0, field.type) }
        case "order.updated_at": return encode(record.newest.occurredAt, field.dateEncoding)
        case "merchant.name": return record.merchantName.map { .string($0.value) }
        case "courier.name": return record.courierName.map { .string($0.value) }
        case "courier.assigned": return .bool(record.courierName != nil)
        case "eta":
            return record.eta.map {
                .array([encode($0.value.earliest, field.dateEncoding), encode($0.value.latest, field.dateEncoding)])
            }
        case "eta.earliest": return record.eta.map { encode($0.value.earliest, field.dateEncoding) }
        case "eta.latest": return record.eta.map { encode($0.value.latest, field.dateEncoding) }
        case "eta.known": return .bool(record.eta != nil)
        default: return nil
        }
    }

    private func convert(_ int: Int, _ type: FieldType) -> JSONValue {
        switch type {
        case .string: .string(String(int))
        case .double: .double(Double(int))
        default: .int(int)
        }
    }

    func encode(_ date: Date, _ encoding: DateEncoding) -> JSONValue {
        switch encoding {
        case .referenceDate: .double(date.timeIntervalSinceReferenceDate)
        case .unixSeconds: .int(Int(date.timeIntervalSince1970.rounded(.down)))
        }
    }
}
