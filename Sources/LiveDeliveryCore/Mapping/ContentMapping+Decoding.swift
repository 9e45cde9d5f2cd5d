import LiveDeliveryJSON

extension ContentMapping {
    /// Reads and checks `content-mapping.json`.
    ///
    /// ## Configuration keys
    /// - `attributesType` (string, required): the Swift `ActivityAttributes` type name
    /// - `attributes`, `contentState` (arrays of fields, required): in the order they are encoded
    /// - each field: `field` (Swift property name, required), `source` (see ``Source/known``;
    ///   absent = constant default), `type` (`string`, `int`, `double`, `bool`, `date`, `dateRange`,
    ///   `enum`), `optional` (bool, default false), `default` (a value of the type; for `date`
    ///   `{"secondsAfterUpdate": n}`, for `dateRange` `{"secondsAfterUpdate": [a, b]}`),
    ///   `dateEncoding` (`referenceDate`, the default, or `unixSeconds`), and for `enum`:
    ///   `values` (status → case, `null` keeps the case of the newest non-terminal status) and
    ///   `cases` (the app enum's cases, checked against `values` and `default`)
    ///
    /// Checks: unknown keys and sources, source/type mismatches, duplicate fields, a non-optional
    /// field whose source can be missing without a default, enum tables missing a status or naming
    /// a case the app does not have.
    package static func decode(
        _ bytes: [UInt8], file: String = "content-mapping.json"
    ) throws(LiveDeliveryCoreError) -> ContentMapping {
        let r = ConfigurationReader(file: file)
        var mapping = ContentMapping(attributesType: "", attributes: [], contentState: [])
        if let root = r.parse(bytes) {
            r.checkKeys(root, at: "", known: ["attributesType", "attributes", "contentState", "comment"])
            if let type = r.string(root, "attributesType", at: "") {
                if type.isEmpty
                    || !type.utf8.allSatisfy({ EventDecoder.isIdentifierByte($0) || $0 == UInt8(ascii: ".") })
                {
                    r.problem("attributesType", "must be a Swift type name")
                }
                mapping.attributesType = type
            } else if root["attributesType"] == nil {
                r.problem("attributesType", "is required (the Swift ActivityAttributes type name)")
            }
            mapping.attributes = fields(root, "attributes", r)
            mapping.contentState = fields(root, "contentState", r)
        }
        guard r.problems.isEmpty else {
            throw LiveDeliveryCoreError(code: .invalidConfiguration, problems: r.problems)
        }
        return mapping
    }

    private static func fields(_ root: JSONObject, _ key: String, _ r: ConfigurationReader) -> [Field] {
        guard let list = r.array(root, key, at: "") else {
            if root[key] == nil { r.problem(key, "is required (an array of fields)") }
            return []
        }
        var result: [Field] = []
        var names = Set<String>()
        for (index, item) in list.enumerated() {
            guard case .object(let object) = item else {
                r.problem("\(key)[\(index)]", "must be an object")
                continue
            }
            guard let name = r.string(object, "field", at: "\(key)[\(index)]"), isSwiftIdentifier(name) else {
                r.problem("\(key)[\(index)].field", "is required and must be a Swift property name")
                continue
            }
            let path = "\(key).\(name)"
            if !names.insert(name).inserted { r.problem(path, "is declared twice") }
            if let field = self.field(name, object, at: path, r) { result.append(field) }
        }
        return result
    }

    /// One field: its type first (without one nothing else can be checked), then each key in turn, then
    /// whether it can always be filled.
    private static func field(_ name: String, _ object: JSONObject, at path: String, _ r: ConfigurationReader) -> Field?
    {
        r.checkKeys(
            object, at: path,
            known: ["field", "source", "type", "optional", "default", "dateEncoding", "values", "cases", "comment"])
        guard let type = fieldType(object, at: path, r) else { return nil }
        var field = Field(
            name: name, source: nil, type: type, optional: r.bool(object, "optional", at: path) ?? false,
            defaultValue: nil, dateEncoding: .referenceDate, values: [:], cases: nil)
        readSource(&field, object, at: path, r)
        readDateEncoding(&field, object, at: path, r)
        if type == .enum {
            readEnum(&field, object, at: path, r)
        } else if object["values"] != nil || object["cases"] != nil {
            r.problem(path, "values and cases are for enum fields")
        }
        readDefault(&field, object, at: path, r)
        checkFilled(field, object, at: path, r)
        return field
    }

    /// `type`: required, one of ``FieldType``.
    private static func fieldType(_ object: JSONObject, at path: String, _ r: ConfigurationReader) -> FieldType? {
        guard let typeText = r.string(object, "type", at: path) else {
            r.problem(path, "needs a type (\(FieldType.allCases.map(\.rawValue).joined(separator: ", ")))")
            return nil
        }
        guard let type = FieldType(rawValue: typeText) else {
            r.problem(
                "\(path).type",
                "unknown type '\(typeText)' (known: \(FieldType.allCases.map(\.rawValue).joined(separator: ", ")))")
            return nil
        }
        return type
    }

    /// `source`: a known source whose kind can fill the field's type.
    private static func readSource(
        _ field: inout Field, _ object: JSONObject, at path: String, _ r: ConfigurationReader
    ) {
        guard let sourceText = r.string(object, "source", at: path) else { return }
        let source = Source(rawValue: sourceText)
        if let kind = source.kind {
            if !compatible(kind, field.type) {
                r.problem("\(path).source", "'\(sourceText)' cannot fill a field of type \(field.type.rawValue)")
            }
            field.source = source
        } else {
            r.problem(
                path,
                "unknown source '\(sourceText)' (known: \(Source.known.map(\.rawValue).joined(separator: ", ")))")
        }
    }

    /// `dateEncoding`: one of ``DateEncoding``.
    private static func readDateEncoding(
        _ field: inout Field, _ object: JSONObject, at path: String, _ r: ConfigurationReader
    ) {
        guard let encoding = r.string(object, "dateEncoding", at: path) else { return }
        if let value = DateEncoding(rawValue: encoding) {
            field.dateEncoding = value
        } else {
            r.problem(
                "\(path).dateEncoding",
                "unknown encoding '\(encoding)' (known: \(DateEncoding.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
    }

    /// `default`: a value of the field's type; for an enum, one of its cases (read after them).
    private static func readDefault(
        _ field: inout Field, _ object: JSONObject, at path: String, _ r: ConfigurationReader
    ) {
        guard let value = object["default"], value != .null else { return }
        field.defaultValue = defaultValue(value, field.type, at: "\(path).default", r)
        if case .string(let text)? = field.defaultValue, let cases = field.cases, !cases.contains(text) {
            r.problem("\(path).default", "'\(text)' is not one of the cases (\(cases.joined(separator: ", ")))")
        }
    }

    /// Every field gets a value: from a source or a default, and a non-optional one whose source can be
    /// missing needs a default (an enum whose every status maps to a case is never missing).
    private static func checkFilled(_ field: Field, _ object: JSONObject, at path: String, _ r: ConfigurationReader) {
        if field.source == nil && field.defaultValue == nil && object["source"] == nil {
            r.problem(path, "needs a source or a default")
        }
        let canBeMissing = field.source.map { !$0.alwaysPresent || field.type == .enum } ?? false
        if !field.optional && canBeMissing && field.defaultValue == nil {
            if field.type == .enum && field.values.values.allSatisfy({ $0 != nil })
                && field.values.count == OrderStatus.known.count
            {
                // Every status maps to a case: never missing.
            } else {
                r.problem(
                    path,
                    "non-optional field needs a default (source '\(field.source!.rawValue)' can be missing); add \"default\" or \"optional\": true"
                )
            }
        }
    }

    private static func readEnum(_ field: inout Field, _ object: JSONObject, at path: String, _ r: ConfigurationReader)
    {
        if let list = r.array(object, "cases", at: path) {
            var cases: [String] = []
            for (index, item) in list.enumerated() {
                guard case .string(let text) = item, !text.isEmpty else {
                    r.problem("\(path).cases[\(index)]", "must be a non-empty string")
                    continue
                }
                cases.append(text)
            }
            field.cases = cases
        }
        guard field.source?.rawValue == "order.status" else {
            r.problem("\(path).source", "an enum field takes its value from 'order.status'")
            return
        }
        guard let table = r.object(object, "values", at: path) else {
            r.problem("\(path).values", "is required: a table from each status to a case")
            return
        }
        for key in table.keys {
            let status = OrderStatus(rawValue: key)
            guard status.isKnown else {
                r.problem(
                    "\(path).values.\(key)",
                    "unknown status (known: \(OrderStatus.known.map(\.rawValue).joined(separator: ", ")))")
                continue
            }
            switch table[key] {
            case .string(let value)?:
                if let cases = field.cases, !cases.contains(value) {
                    r.problem(
                        "\(path).values.\(key)", "'\(value)' is not one of the cases (\(cases.joined(separator: ", ")))"
                    )
                }
                field.values[status] = .some(value)
            case .null?:
                field.values[status] = .some(nil)
            default:
                r.problem("\(path).values.\(key)", "must be a case name or null (keep the previous case)")
            }
        }
        let missing = OrderStatus.known.filter { field.values[$0] == nil }
        if !missing.isEmpty {
            r.problem("\(path).values", "has no entry for \(missing.map(\.rawValue).joined(separator: ", "))")
        }
    }

    private static func compatible(_ kind: Source.Kind, _ type: FieldType) -> Bool {
        switch (kind, type) {
        case (.string, .string), (.int, .string), (.status, .string): true
        case (.int, .int), (.int, .double): true
        case (.bool, .bool), (.date, .date), (.dateRange, .dateRange), (.status, .enum): true
        default: false
        }
    }

    private static func defaultValue(
        _ value: JSONValue, _ type: FieldType, at path: String, _ r: ConfigurationReader
    ) -> DefaultValue? {
        switch (type, value) {
        case (.string, .string(let s)), (.enum, .string(let s)): return .string(s)
        case (.int, .int(let i)): return .int(i)
        case (.double, .int(let i)): return .double(Double(i))
        case (.double, .double(let d)): return .double(d)
        case (.bool, .bool(let b)): return .bool(b)
        case (.date, .object(let o)):
            if case .int(let s)? = o["secondsAfterUpdate"], o.keys.count == 1 { return .secondsAfterUpdate(Double(s)) }
            if case .double(let s)? = o["secondsAfterUpdate"], o.keys.count == 1 { return .secondsAfterUpdate(s) }
        case (.dateRange, .object(let o)):
            if case .array(let pair)? = o["secondsAfterUpdate"], o.keys.count == 1, pair.count == 2,
                let a = seconds(pair[0]), let b = seconds(pair[1])
            {
                if a > b { r.problem(path, "the range's lower bound is after its upper bound") }
                return .rangeAfterUpdate(a, b)
            }
        default: break
        }
        let expected: String =
            switch type {
            case .string, .enum: "a string"
            case .int: "an integer"
            case .double: "a number"
            case .bool: "true or false"
            case .date: "{\"secondsAfterUpdate\": n}"
            case .dateRange: "{\"secondsAfterUpdate\": [a, b]}"
            }
        r.problem(path, "must be \(expected) for a field of type \(type.rawValue)")
        return nil
    }

    private static func seconds(_ value: JSONValue) -> Double? {
        switch value {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    static func isSwiftIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(48...57).contains(first) else { return false }
        return name.utf8.allSatisfy(EventDecoder.isIdentifierByte)
    }
}
