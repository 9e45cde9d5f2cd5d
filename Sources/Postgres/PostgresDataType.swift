/// A PostgreSQL type OID, with names for the built-in types this module binds and decodes.
package struct PostgresDataType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    package init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// Lets the server infer the parameter's type from its use (as for an untyped literal).
    package static let unspecified = PostgresDataType(0)
    package static let bool = PostgresDataType(16)
    package static let bytea = PostgresDataType(17)
    package static let char = PostgresDataType(18)
    package static let name = PostgresDataType(19)
    package static let int8 = PostgresDataType(20)
    package static let int2 = PostgresDataType(21)
    package static let int4 = PostgresDataType(23)
    package static let text = PostgresDataType(25)
    package static let oid = PostgresDataType(26)
    package static let json = PostgresDataType(114)
    package static let jsonArray = PostgresDataType(199)
    package static let float4 = PostgresDataType(700)
    package static let float8 = PostgresDataType(701)
    package static let unknown = PostgresDataType(705)
    package static let boolArray = PostgresDataType(1000)
    package static let byteaArray = PostgresDataType(1001)
    package static let int2Array = PostgresDataType(1005)
    package static let int4Array = PostgresDataType(1007)
    package static let textArray = PostgresDataType(1009)
    package static let varcharArray = PostgresDataType(1015)
    package static let int8Array = PostgresDataType(1016)
    package static let float8Array = PostgresDataType(1022)
    package static let bpchar = PostgresDataType(1042)
    package static let varchar = PostgresDataType(1043)
    package static let date = PostgresDataType(1082)
    package static let timestamp = PostgresDataType(1114)
    package static let timestamptz = PostgresDataType(1184)
    package static let timestamptzArray = PostgresDataType(1185)
    package static let interval = PostgresDataType(1186)
    package static let numeric = PostgresDataType(1700)
    package static let uuid = PostgresDataType(2950)
    package static let uuidArray = PostgresDataType(2951)
    package static let jsonb = PostgresDataType(3802)

    private static let names: [PostgresDataType: String] = [
        .bool: "bool", .bytea: "bytea", .char: "char", .name: "name", .int8: "int8", .int2: "int2", .int4: "int4",
        .text: "text", .oid: "oid", .json: "json", .jsonArray: "json[]", .float4: "float4", .float8: "float8",
        .unknown: "unknown",
        .boolArray: "bool[]", .int2Array: "int2[]", .int4Array: "int4[]", .textArray: "text[]",
        .varcharArray: "varchar[]", .int8Array: "int8[]", .float8Array: "float8[]", .bpchar: "bpchar",
        .varchar: "varchar", .date: "date", .timestamp: "timestamp", .timestamptz: "timestamptz",
        .timestamptzArray: "timestamptz[]", .interval: "interval", .numeric: "numeric", .uuid: "uuid",
        .uuidArray: "uuid[]", .jsonb: "jsonb",
    ]

    package var description: String { Self.names[self] ?? "oid \(rawValue)" }

    /// Types whose text form is the string itself (user-defined types such as enums are included: OIDs from
    /// 16384 on are assigned to objects created after initdb).
    var isTextLike: Bool {
        self == .text || self == .varchar || self == .bpchar || self == .name || self == .char || self == .unknown
            || rawValue >= 16384
    }

    var isInteger: Bool { self == .int2 || self == .int4 || self == .int8 || self == .oid }
}
