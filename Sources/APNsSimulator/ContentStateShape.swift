import Foundation
import LiveDeliveryJSON

/// The app's ActivityKit types, described well enough to tell whether a push would decode on the device
/// with a default `JSONDecoder` (the check APNs itself never makes).
///
/// File format (JSON):
/// ```json
/// { "attributesType": "DeliveryAttributes",
///   "attributes":   { "orderNumber": "int", "restaurantName": "string" },
///   "contentState": { "driverName": "string", "estimatedDeliveryTime": "dateRange",
///                     "currentStep": { "enum": ["confirmed", "preparing", "pickedUp", "delivering", "delivered"] } } }
/// ```
/// Types: `string`, `int`, `double`, `bool`, `date` (a number: seconds since 2001-01-01, the default `Date`
/// coding), `dateRange` (a two-element array `[lower, upper]` with `lower <= upper`, the default
/// `ClosedRange<Date>` coding) and `{"enum": [...]}` (a `String` raw-value enum). A trailing `?` (`"string?"`)
/// makes a key optional. Keys not listed are ignored, as `JSONDecoder` ignores them.
package struct ContentStateShape: Sendable, Hashable, Codable {
    package var attributesType: String?
    package var attributes: [String: FieldType]
    package var contentState: [String: FieldType]

    package init(attributesType: String?, attributes: [String: FieldType], contentState: [String: FieldType]) {
        self.attributesType = attributesType
        self.attributes = attributes
        self.contentState = contentState
    }

    /// Loads a shape file.
    package init(contentsOfFile path: String) throws(SimulatorError) {
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            self = try JSONDecoder().decode(ContentStateShape.self, from: data)
        } catch {
            throw SimulatorError(.invalidConfiguration, "content-state shape \(path) is unreadable: \(error)")
        }
    }

    private enum CodingKeys: String, CodingKey { case attributesType, attributes, contentState }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        attributesType = try container.decodeIfPresent(String.self, forKey: .attributesType)
        attributes = try container.decodeIfPresent([String: FieldType].self, forKey: .attributes) ?? [:]
        contentState = try container.decode([String: FieldType].self, forKey: .contentState)
    }

    /// The default app contract of the product: `DeliveryAttributes` from the event contract.
    package static let deliveryAttributes = ContentStateShape(
        attributesType: "DeliveryAttributes",
        attributes: ["orderNumber": .init(.int), "restaurantName": .init(.string)],
        contentState: [
            "driverName": .init(.string),
            "estimatedDeliveryTime": .init(.dateRange),
            "currentStep": .init(.enumeration(["confirmed", "preparing", "pickedUp", "delivering", "delivered"])),
        ]
    )

    /// `nil` when `value` decodes, else why it would not.
    func problem(contentState value: JSONValue) -> String? {
        Self.problem(value, fields: contentState, what: "content-state")
    }

    /// `nil` when the start push's attributes decode, else why they would not.
    func problem(attributesType type: String?, attributes value: JSONValue?) -> String? {
        if let expected = attributesType, type != expected {
            return "attributes-type \(type ?? "(none)") is not \(expected)"
        }
        guard let value else { return "attributes missing" }
        return Self.problem(value, fields: attributes, what: "attributes")
    }

    private static func problem(_ value: JSONValue, fields: [String: FieldType], what: String) -> String? {
        guard case .object(let object) = value else { return "\(what) is not an object" }
        for (key, field) in fields.sorted(by: { $0.key < $1.key }) {
            guard let member = object[key], member != .null else {
                if field.optional { continue }
                return "\(what).\(key) is missing"
            }
            if !field.kind.accepts(member) {
                return "\(what).\(key) is not a valid \(field.kind.name)"
            }
        }
        return nil
    }

    /// One field's type and whether it may be absent.
    package struct FieldType: Sendable, Hashable, Codable {
        package var kind: Kind
        package var optional: Bool

        package init(_ kind: Kind, optional: Bool = false) {
            self.kind = kind
            self.optional = optional
        }

        package enum Kind: Sendable, Hashable {
            case string, int, double, bool, date, dateRange
            case enumeration([String])

            var name: String {
                switch self {
                case .string: "string"
                case .int: "int"
                case .double: "double"
                case .bool: "bool"
                case .date: "date"
                case .dateRange: "dateRange"
                case .enumeration: "enum value"
                }
            }

            func accepts(_ value: JSONValue) -> Bool {
                switch (self, value) {
                case (.string, .string), (.bool, .bool), (.double, .int), (.double, .double), (.date, .int),
                    (.date, .double), (.int, .int):
                    return true
                case (.enumeration(let cases), .string(let string)): return cases.contains(string)
                case (.dateRange, .array(let bounds)):
                    guard bounds.count == 2, let lower = bounds[0].numberValue, let upper = bounds[1].numberValue
                    else { return false }
                    return lower <= upper
                default: return false
                }
            }
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let name = try? container.decode(String.self) {
                let optional = name.hasSuffix("?")
                let base = optional ? String(name.dropLast()) : name
                let kinds: [String: Kind] = [
                    "string": .string, "int": .int, "double": .double, "bool": .bool, "date": .date,
                    "dateRange": .dateRange,
                ]
                guard let kind = kinds[base] else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "unknown type \(name)")
                }
                self.init(kind, optional: optional)
            } else {
                let object = try container.decode(EnumDescription.self)
                self.init(.enumeration(object.enum), optional: object.optional ?? false)
            }
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            if case .enumeration(let cases) = kind {
                try container.encode(EnumDescription(enum: cases, optional: optional ? true : nil))
            } else {
                try container.encode(kind.name + (optional ? "?" : ""))
            }
        }

        private struct EnumDescription: Codable {
            var `enum`: [String]
            var optional: Bool?
        }
    }
}
