/// A PostgreSQL type OID, with names for the built-in types this module binds and decodes.
public struct PostgresDataType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// Lets the server infer the parameter's type from its use (as for an untyped literal).
    public static let unspecified = PostgresDataType(0)
    public static let bool = PostgresDataType(16)
    public static let bytea = PostgresDataType(17)
    public static let char = PostgresDataType(18)
    public static let name = PostgresDataType(19)
    public static let int8 = PostgresDataType(20)
    public static let int2 = PostgresDataType(21)
    public static let int4 = PostgresDataType(23)
    public static let text = PostgresDataType(25)
    public static let oid = PostgresDataType(26)
    public static let json = PostgresDataType(114)
    public static let jsonArray = PostgresDataType(199)
    public static let float4 = PostgresDataType(700)
    public static let float8 = PostgresDataType(701)
    public static let unknown = PostgresDataType(705)
    public static let boolArray = PostgresDataType(1000)
    public static let int2Array = PostgresDataType(1005)
    public static let int4Array = PostgresDataType(1007)
    public static let textArray = PostgresDataType(1009)
    public static let varcharArray = PostgresDataType(1015)
    public static let int8Array = PostgresDataType(1016)
    public static let float8Array = PostgresDataType(1022)
    public static let bpchar = PostgresDataType(1042)
    public static let varchar = PostgresDataType(1043)
    public static let date = PostgresDataType(1082)
    public static let timestamp = PostgresDataType(1114)
    public static let timestamptz = PostgresDataType(1184)
    public static let timestamptzArray = PostgresDataType(1185)
    public static let interval = PostgresDataType(1186)
    public static let numeric = PostgresDataType(1700)
    public static let uuid = PostgresDataType(2950)
    public static let uuidArray = PostgresDataType(2951)
    public static let jsonb = PostgresDataType(3802)

    private static let names: [PostgresDataType: String] = [
        .bool: "bool", .bytea: "bytea", .char: "char", .name: "name", .int8: "int8", .int2: "int2", .int4: "int4",
        .text: "text", .oid: "oid", .json: "json", .jsonArray: "json[]", .float4: "float4", .float8: "float8", .unknown: "unknown",
        .boolArray: "bool[]", .int2Array: "int2[]", .int4Array: "int4[]", .textArray: "text[]",
        .varcharArray: "varchar[]", .int8Array: "int8[]", .float8Array: "float8[]", .bpchar: "bpchar",
        .varchar: "varchar", .date: "date", .timestamp: "timestamp", .timestamptz: "timestamptz",
        .timestamptzArray: "timestamptz[]", .interval: "interval", .numeric: "numeric", .uuid: "uuid",
        .uuidArray: "uuid[]", .jsonb: "jsonb",
    ]

    public var description: String { Self.names[self] ?? "oid \(rawValue)" }

    /// Types whose text form is the string itself (user-defined types such as enums are included: OIDs from
    /// 16384 on are assigned to objects created after initdb).
    var isTextLike: Bool {
        self == .text || self == .varchar || self == .bpchar || self == .name || self == .char || self == .unknown
            || rawValue >= 16384
    }

    var isInteger: Bool { self == .int2 || self == .int4 || self == .int8 || self == .oid }
}
