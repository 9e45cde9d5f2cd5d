import LiveDeliveryJSON

/// Reads one JSON configuration file and collects every problem with its file and key path
/// (`content-mapping.json: contentState.driverName: unknown source 'courier.nam' (known: …)`),
/// so that a wrong file fails at start-up with all its mistakes listed at once.
final class ConfigurationReader {
    let file: String
    private(set) var problems: [String] = []

    init(file: String) { self.file = file }

    func problem(_ path: String, _ message: String) {
        problems.append(path.isEmpty ? "\(file): \(message)" : "\(file): \(path): \(message)")
    }

    func parse(_ bytes: [UInt8]) -> JSONObject? {
        guard let value = JSONValue.parse(bytes) else {
            problem("", "not valid JSON")
            return nil
        }
        guard case .object(let object) = value else {
            problem("", "the top level must be an object, not \(value.typeName)")
            return nil
        }
        return object
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// Reports keys that are not in `known` (typos would otherwise be silently ignored).
    func checkKeys(_ object: JSONObject, at path: String, known: [String]) {
        for key in object.keys where !known.contains(key) {
            problem(Self.join(path, key), "unknown key (known: \(known.joined(separator: ", ")))")
        }
    }

    func object(_ object: JSONObject, _ key: String, at path: String) -> JSONObject? {
        switch object[key] {
        case .none, .null?: return nil
        case .object(let value)?: return value
        case let other?:
            problem(Self.join(path, key), "must be an object, not \(other.typeName)")
            return nil
        }
    }

    func array(_ object: JSONObject, _ key: String, at path: String) -> [JSONValue]? {
        switch object[key] {
        case .none, .null?: return nil
        case .array(let value)?: return value
        case let other?:
            problem(Self.join(path, key), "must be an array, not \(other.typeName)")
            return nil
        }
    }

    func string(_ object: JSONObject, _ key: String, at path: String) -> String? {
        switch object[key] {
        case .none, .null?: return nil
        case .string(let value)?: return value
        case let other?:
            problem(Self.join(path, key), "must be a string, not \(other.typeName)")
            return nil
        }
    }

    func bool(_ object: JSONObject, _ key: String, at path: String) -> Bool? {
        switch object[key] {
        case .none, .null?: return nil
        case .bool(let value)?: return value
        case let other?:
            problem(Self.join(path, key), "must be true or false, not \(other.typeName)")
            return nil
        }
    }

    func number(_ object: JSONObject, _ key: String, at path: String, in range: ClosedRange<Double>) -> Double? {
        let value: Double
        switch object[key] {
        case .none, .null?: return nil
        case .int(let int)?: value = Double(int)
        case .double(let double)?: value = double
        case let other?:
            problem(Self.join(path, key), "must be a number, not \(other.typeName)")
            return nil
        }
        guard range.contains(value) else {
            problem(
                Self.join(path, key),
                "must be between \(JSONWriter.format(range.lowerBound)) and \(JSONWriter.format(range.upperBound)) (is \(JSONWriter.format(value)))"
            )
            return nil
        }
        return value
    }

    func integer(_ object: JSONObject, _ key: String, at path: String, in range: ClosedRange<Int>) -> Int? {
        switch object[key] {
        case .none, .null?: return nil
        case .int(let value)?:
            guard range.contains(value) else {
                problem(
                    Self.join(path, key), "must be between \(range.lowerBound) and \(range.upperBound) (is \(value))")
                return nil
            }
            return value
        case let other?:
            problem(Self.join(path, key), "must be an integer, not \(other.typeName)")
            return nil
        }
    }
}
