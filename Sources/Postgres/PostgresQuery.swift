/// One SQL statement with its parameters, built by string interpolation.
///
/// Every interpolated value becomes a bind parameter (`$1`, `$2`, …) sent separately from the SQL, so values can
/// never change the statement:
///
///     let rows = try await client.query("SELECT id FROM orders WHERE customer = \(customerID) AND state = \(state)")
///
/// Trusted identifiers (a table name chosen by the program, never by input) go in with `\(unsafeRaw: name)`.
/// A statement with no parameters can be written with `PostgresQuery(unsafeSQL:)`.
package struct PostgresQuery: Sendable, Hashable, ExpressibleByStringInterpolation {
    /// The SQL text with `$n` placeholders.
    package var sql: String
    /// The bound values, in `$n` order.
    package var binds: PostgresBindings
    /// Whether the server may reuse one plan for every run (the default) or plans each run afresh.
    package var planning: Planning = .cached
    /// The wire format the server sends the result in.
    package var results: ResultFormat = .text

    package init(unsafeSQL sql: String, binds: PostgresBindings = PostgresBindings()) {
        self.sql = sql
        self.binds = binds
    }

    /// How the server plans a statement.
    package enum Planning: Sendable, Hashable {
        /// Prepared once per connection and run by name; after a few runs PostgreSQL may settle on one
        /// generic plan, made for the table sizes of that moment, and keep it until the next `ANALYZE`.
        case cached
        /// Sent unprepared, so each run is planned with its parameters and the tables' current sizes:
        /// for statements on a table that swings between empty and large, such as a queue, where a plan
        /// cached while it was empty (a sequential scan, or the table as the outer side of a join) turns
        /// quadratic once it fills.
        case everyRun
    }

    /// The format of a statement's result cells.
    package enum ResultFormat: Sendable, Hashable {
        /// Every cell in PostgreSQL's text output form (`bytea` as hex): any column type decodes.
        case text
        /// Every cell in PostgreSQL's binary form: `bytea` arrives as its bytes, with no hex to write on the server
        /// and to read here (half the bytes on the wire). Only columns of text, integer, `bool` and `bytea` types
        /// may be in such a result: a statement that returns another type fails with a `.decoding` error.
        case binary
    }

    /// libpq's `resultFormat`.
    var resultFormatCode: Int32 { results == .binary ? 1 : 0 }

    /// This statement with its result in another ``ResultFormat``.
    package func results(_ format: ResultFormat) -> PostgresQuery {
        var query = self
        query.results = format
        return query
    }

    /// This statement with another ``Planning``.
    package func planned(_ planning: Planning) -> PostgresQuery {
        var query = self
        query.planning = planning
        return query
    }

    package init(stringLiteral value: String) {
        self.init(unsafeSQL: value)
    }

    package init(stringInterpolation: StringInterpolation) {
        self.init(unsafeSQL: stringInterpolation.sql, binds: stringInterpolation.binds)
    }

    package struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var sql: String
        var binds: PostgresBindings

        package init(literalCapacity: Int, interpolationCount: Int) {
            sql = ""
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds = PostgresBindings(capacity: interpolationCount)
        }

        package mutating func appendLiteral(_ literal: String) {
            sql.append(literal)
        }

        /// A value, sent as a bind parameter.
        package mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value) {
            binds.append(value)
            sql.append("$\(binds.count)")
        }

        /// An optional value; nil is sent as SQL NULL (typed as `Value`'s PostgreSQL type).
        package mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            binds.append(value)
            sql.append("$\(binds.count)")
        }

        /// Text pasted into the SQL as is. Only for trusted identifiers and fragments chosen by the program.
        package mutating func appendInterpolation(unsafeRaw text: String) {
            sql.append(text)
        }

        /// An integer written into the SQL, not bound: for a constant the planner must see in a statement
        /// that is prepared once and run many times, such as a fixed `LIMIT` (a generic plan assumes a
        /// tenth of the table behind `LIMIT $n`). Each distinct value is a distinct statement.
        package mutating func appendInterpolation(literal value: Int) {
            sql.append(String(value))
        }
    }
}

/// One bind parameter's value, in one of PostgreSQL's two wire formats.
package enum PostgresParameterValue: Sendable, Hashable {
    /// The type's text input form.
    case text(String)
    /// The type's binary (`*_recv`) form.
    case binary([UInt8])
}

/// The parameters of a `PostgresQuery`, with their type OIDs.
package struct PostgresBindings: Sendable, Hashable {
    /// The values; nil is SQL NULL.
    package private(set) var parameters: [PostgresParameterValue?]
    /// Type OIDs; `.unspecified` lets the server infer the type.
    package private(set) var types: [PostgresDataType]

    package init() {
        parameters = []
        types = []
    }

    init(capacity: Int) {
        parameters = []
        parameters.reserveCapacity(capacity)
        types = []
        types.reserveCapacity(capacity)
    }

    package var count: Int { parameters.count }

    /// The text form of each value (a binary value's text form is not known here: nil, as for NULL).
    package var values: [String?] {
        parameters.map { if case .text(let text)? = $0 { text } else { nil } }
    }

    package mutating func append<Value: PostgresEncodable>(_ value: Value) {
        parameters.append(value.postgresParameter)
        types.append(Value.postgresType)
    }

    package mutating func append<Value: PostgresEncodable>(_ value: Value?) {
        parameters.append(value?.postgresParameter)
        types.append(Value.postgresType)
    }
}
