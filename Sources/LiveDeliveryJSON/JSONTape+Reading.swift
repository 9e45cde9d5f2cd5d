package import Foundation

/// Reading Swift values field by field from a tape, for the documents read on the hot path. Errors
/// are the `DecodingError`s `JSONDecoder` would throw for the same fields, with the same coding path.
extension JSONTape {
    /// The members of one object of the tape.
    ///
    /// Errors get their coding path on the way out (each member and element puts its key in front),
    /// so a read that succeeds builds no path at all.
    package struct Object {
        package let tape: JSONTape
        let index: Int

        package init(_ tape: JSONTape, _ index: Int) throws {
            guard tape.kind(at: index) == .object else { throw tape.mismatch([String: Any].self, at: index) }
            self.tape = tape
            self.index = index
        }

        /// A required member: missing is `keyNotFound`, null is `valueNotFound` (from `value`).
        package func read<Value>(_ key: String, _ value: (Int) throws -> Value) throws -> Value {
            guard let member = tape.find(key, in: index) else {
                throw DecodingError.keyNotFound(
                    JSONPathKey(key),
                    .init(codingPath: [], debugDescription: "No value associated with key \"\(key)\"."))
            }
            return try JSONTape.prefixing(JSONPathKey(key)) { try value(member) }
        }

        /// An optional member: missing or null is nil, as `decodeIfPresent` reads it.
        package func readIfPresent<Value>(_ key: String, _ value: (Int) throws -> Value) throws -> Value? {
            guard let member = tape.find(key, in: index), tape.kind(at: member) != .null else { return nil }
            return try JSONTape.prefixing(JSONPathKey(key)) { try value(member) }
        }

        package func string(_ key: String) throws -> String { try read(key) { index in try tape.string(at: index) } }

        package func stringIfPresent(_ key: String) throws -> String? {
            try readIfPresent(key) { index in try tape.string(at: index) }
        }

        package func int(_ key: String) throws -> Int {
            try read(key) { index in try tape.integer(Int.self, at: index) }
        }

        package func double(_ key: String) throws -> Double { try read(key) { index in try tape.double(at: index) } }

        /// A `Date` as `JSONDecoder` reads it by default: seconds since 2001.
        package func date(_ key: String) throws -> Date { try read(key) { index in try tape.date(at: index) } }
    }

    /// The array at `index`, each element read by `element` from its index.
    package func array<Element>(at index: Int, _ element: (Int) throws -> Element) throws -> [Element] {
        guard kind(at: index) == .array else { throw mismatch([Element].self, at: index) }
        let end = next(after: index)
        var elements: [Element] = []
        elements.reserveCapacity(Int(tokens[index].count))
        var item = index + 1
        var position = 0
        while item < end {
            elements.append(try JSONTape.prefixing(JSONPathKey(index: position)) { try element(item) })
            item = next(after: item)
            position += 1
        }
        return elements
    }

    /// A `Date` as `JSONDecoder` reads it by default: seconds since 2001.
    package func date(at index: Int) throws -> Date { Date(timeIntervalSinceReferenceDate: try double(at: index)) }

    /// A `RawRepresentable` string, refused as `JSONDecoder` refuses an unknown case.
    package func rawValue<Value: RawRepresentable<String>>(_ type: Value.Type, at index: Int) throws -> Value {
        let text = try string(at: index)
        guard let value = Value(rawValue: text) else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: [],
                    debugDescription: "Cannot initialize \(Value.self) from invalid String value \(text)"))
        }
        return value
    }

    /// Puts `key` in front of the coding path of a decoding error leaving `body`.
    static func prefixing<Value>(_ key: JSONPathKey, _ body: () throws -> Value) throws -> Value {
        do {
            return try body()
        } catch let error as DecodingError {
            func context(_ context: DecodingError.Context) -> DecodingError.Context {
                .init(
                    codingPath: [key] + context.codingPath, debugDescription: context.debugDescription,
                    underlyingError: context.underlyingError)
            }
            switch error {
            case .typeMismatch(let type, let c): throw DecodingError.typeMismatch(type, context(c))
            case .valueNotFound(let type, let c): throw DecodingError.valueNotFound(type, context(c))
            case .keyNotFound(let missing, let c): throw DecodingError.keyNotFound(missing, context(c))
            case .dataCorrupted(let c): throw DecodingError.dataCorrupted(context(c))
            @unknown default: throw error
            }
        }
    }
}
