import Foundation
import LiveDeliveryJSON

/// An alert text with placeholders, plain or localised.
///
/// Placeholders: `{courier}`, `{merchant}`, `{order_number}`, `{eta_minutes}` (whole minutes from
/// now until `eta.latest`, rounded up), `{eta_window}` (`20–30`, minutes until earliest and latest).
/// A placeholder whose value is unknown (no courier yet, no ETA, an ETA in the past) makes the
/// template unusable, and the next template of the list is tried.
package struct AlertTemplate: Sendable, Hashable {
    package enum Text: Sendable, Hashable {
        /// Shown as is after filling the placeholders.
        case plain(String)
        /// `{"loc-key": key, "loc-args": [args…]}`: the app's Localizable strings format it.
        case localized(key: String, args: [String])
    }

    package var title: Text
    package var subtitle: Text?
    package var body: Text?

    package init(title: Text, subtitle: Text? = nil, body: Text? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
    }

    package static let placeholders = ["courier", "merchant", "order_number", "eta_minutes", "eta_window"]

    /// The placeholders the template uses.
    package var usedPlaceholders: Set<String> {
        var names = Set<String>()
        for text in [title, subtitle, body].compactMap({ $0 }) {
            switch text {
            case .plain(let string): names.formUnion(Self.placeholderNames(in: string))
            case .localized(_, let args): for arg in args { names.formUnion(Self.placeholderNames(in: arg)) }
            }
        }
        return names
    }

    /// `{name}` occurrences where name is lowercase letters and underscores.
    static func placeholderNames(in string: String) -> [String] {
        var names: [String] = []
        var current: String?
        for character in string {
            if character == "{" {
                current = ""
            } else if character == "}" {
                if let name = current, !name.isEmpty { names.append(name) }
                current = nil
            } else if current != nil {
                if character.isLetter && character.isLowercase || character == "_" {
                    current!.append(character)
                } else {
                    current = nil
                }
            }
        }
        return names
    }

    /// Fills the template, or nil when a placeholder it uses has no value.
    func render(_ values: [String: String], sound: String?) -> AlertContent? {
        guard usedPlaceholders.allSatisfy({ values[$0] != nil }) else { return nil }
        func fill(_ text: Text) -> AlertContent.Text {
            switch text {
            case .plain(let string): .plain(Self.fill(string, values))
            case .localized(let key, let args): .localized(key: key, args: args.map { Self.fill($0, values) })
            }
        }
        return AlertContent(title: fill(title), subtitle: subtitle.map(fill), body: body.map(fill), sound: sound)
    }

    /// One pass over the template, so a value that itself contains `{…}` is never expanded again.
    static func fill(_ string: String, _ values: [String: String]) -> String {
        var result = ""
        var pending: String?
        for character in string {
            if character == "{" {
                if let open = pending { result += open }
                pending = "{"
            } else if var open = pending {
                open.append(character)
                if character == "}" {
                    let name = String(open.dropFirst().dropLast())
                    result += values[name] ?? open
                    pending = nil
                } else if character.isLetter && character.isLowercase || character == "_" {
                    pending = open
                } else {
                    result += open
                    pending = nil
                }
            } else {
                result.append(character)
            }
        }
        if let open = pending { result += open }
        return result
    }

    /// The values available for an order at `now`.
    static func values(for record: OrderRecord?, now: Date) -> [String: String] {
        var values: [String: String] = [:]
        guard let record else { return values }
        if let courier = record.courierName?.value { values["courier"] = courier }
        if let merchant = record.merchantName?.value { values["merchant"] = merchant }
        if let number = record.orderNumber?.value { values["order_number"] = String(number) }
        if let eta = record.eta?.value, eta.latest > now {
            let latest = Int((eta.latest.timeIntervalSince(now) / 60).rounded(.up))
            let earliest = max(0, Int((eta.earliest.timeIntervalSince(now) / 60).rounded(.up)))
            values["eta_minutes"] = String(latest)
            values["eta_window"] = earliest == latest ? String(latest) : "\(earliest)–\(latest)"
        }
        return values
    }
}

/// A filled alert, as it goes into `aps.alert`.
package struct AlertContent: Sendable, Hashable, Codable, CustomStringConvertible {
    package enum Text: Sendable, Hashable, Codable, CustomStringConvertible {
        case plain(String)
        case localized(key: String, args: [String])

        var json: JSONValue {
            switch self {
            case .plain(let string): .string(string)
            case .localized(let key, let args):
                args.isEmpty
                    ? .object(JSONObject([("loc-key", .string(key))]))
                    : .object(JSONObject([("loc-key", .string(key)), ("loc-args", .array(args.map { .string($0) }))]))
            }
        }

        package var description: String {
            switch self {
            case .plain(let string): string
            case .localized(let key, let args): "\(key)(\(args.joined(separator: ", ")))"
            }
        }
    }

    package var title: Text
    package var subtitle: Text?
    package var body: Text?
    package var sound: String?

    package init(title: Text, subtitle: Text? = nil, body: Text? = nil, sound: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
    }

    /// `{"title": …, "subtitle": …, "body": …, "sound": "default"}` (sound inside the alert, as
    /// Apple's Live Activity samples have it).
    var json: JSONValue {
        var object = JSONObject()
        object["title"] = title.json
        object["subtitle"] = subtitle?.json
        object["body"] = body?.json
        object["sound"] = sound.map(JSONValue.string)
        return .object(object)
    }

    package var description: String {
        [title.description, subtitle?.description, body?.description].compactMap { $0 }.joined(separator: " — ")
    }
}
