import CRabbitMQ
import CShims
import Foundation

/// Owns the C memory built for one library call (table entries, byte strings, properties) and
/// frees it all in `deinit`. rabbitmq-c copies/encodes what it needs during the call, so the arena
/// only has to outlive that call. Confined to the connection thread.
final class CArena {
    private var allocations: [UnsafeMutableRawPointer] = []

    init() {}

    deinit {
        for pointer in allocations { free(pointer) }
    }

    private func allocate(_ count: Int) -> UnsafeMutableRawPointer {
        guard let pointer = malloc(max(count, 1)) else { fatalError("out of memory") }
        allocations.append(pointer)
        return pointer
    }

    /// A copy of `string` as `amqp_bytes_t` (not NUL-terminated).
    func bytes(_ string: String) -> amqp_bytes_t {
        bytes(Array(string.utf8))
    }

    func bytes(_ array: [UInt8]) -> amqp_bytes_t {
        let pointer = allocate(array.count)
        array.withUnsafeBytes { source in
            if let base = source.baseAddress { pointer.copyMemory(from: base, byteCount: source.count) }
        }
        return amqp_bytes_t(len: array.count, bytes: pointer)
    }

    /// A NUL-terminated copy, alive as long as the arena.
    func cString(_ string: String) -> UnsafePointer<CChar> {
        let utf8 = Array(string.utf8CString)
        let pointer = allocate(utf8.count)
        utf8.withUnsafeBytes { pointer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return UnsafePointer(pointer.assumingMemoryBound(to: CChar.self))
    }

    func table(_ dictionary: [String: AMQPValue]) -> amqp_table_t {
        guard !dictionary.isEmpty else { return amqp_table_t(num_entries: 0, entries: nil) }
        let entries = allocate(MemoryLayout<amqp_table_entry_t>.stride * dictionary.count)
            .bindMemory(to: amqp_table_entry_t.self, capacity: dictionary.count)
        // Sorted keys: deterministic encoding (and x-arguments compare equal on redeclare either way).
        for (index, key) in dictionary.keys.sorted().enumerated() {
            entries.advanced(by: index).initialize(
                to: amqp_table_entry_t(key: bytes(key), value: field(dictionary[key]!)))
        }
        return amqp_table_t(num_entries: Int32(dictionary.count), entries: entries)
    }

    func field(_ value: AMQPValue) -> amqp_field_value_t {
        var field = amqp_field_value_t()
        func kind(_ kind: amqp_field_value_kind_t) -> UInt8 { UInt8(truncatingIfNeeded: kind.rawValue) }
        switch value {
        case .string(let string):
            field.kind = kind(AMQP_FIELD_KIND_UTF8)
            field.value.bytes = bytes(string)
        case .bool(let bool):
            field.kind = kind(AMQP_FIELD_KIND_BOOLEAN)
            field.value.boolean = bool ? 1 : 0
        case .int32(let int):
            field.kind = kind(AMQP_FIELD_KIND_I32)
            field.value.i32 = int
        case .int64(let int):
            field.kind = kind(AMQP_FIELD_KIND_I64)
            field.value.i64 = int
        case .double(let double):
            field.kind = kind(AMQP_FIELD_KIND_F64)
            field.value.f64 = double
        case .timestamp(let date):
            field.kind = kind(AMQP_FIELD_KIND_TIMESTAMP)
            field.value.u64 = UInt64(max(0, date.timeIntervalSince1970.rounded(.down)))
        case .array(let values):
            field.kind = kind(AMQP_FIELD_KIND_ARRAY)
            let entries = allocate(MemoryLayout<amqp_field_value_t>.stride * values.count)
                .bindMemory(to: amqp_field_value_t.self, capacity: values.count)
            for (index, element) in values.enumerated() {
                entries.advanced(by: index).initialize(to: self.field(element))
            }
            field.value.array = amqp_array_t(num_entries: Int32(values.count), entries: values.isEmpty ? nil : entries)
        case .table(let dictionary):
            field.kind = kind(AMQP_FIELD_KIND_TABLE)
            field.value.table = table(dictionary)
        case .bytes(let array):
            field.kind = kind(AMQP_FIELD_KIND_BYTES)
            field.value.bytes = bytes(array)
        case .void:
            field.kind = kind(AMQP_FIELD_KIND_VOID)
        }
        return field
    }

    func properties(_ properties: RabbitMQMessageProperties) -> amqp_basic_properties_t {
        var result = amqp_basic_properties_t()
        var flags: amqp_flags_t = 0
        func set(
            _ value: String?, _ flag: amqp_flags_t, _ keyPath: WritableKeyPath<amqp_basic_properties_t, amqp_bytes_t>
        ) {
            guard let value else { return }
            result[keyPath: keyPath] = bytes(value)
            flags |= flag
        }
        set(properties.contentType, CShims_amqp_BASIC_CONTENT_TYPE_FLAG, \.content_type)
        set(properties.contentEncoding, CShims_amqp_BASIC_CONTENT_ENCODING_FLAG, \.content_encoding)
        set(properties.correlationID, CShims_amqp_BASIC_CORRELATION_ID_FLAG, \.correlation_id)
        set(properties.replyTo, CShims_amqp_BASIC_REPLY_TO_FLAG, \.reply_to)
        set(properties.expiration, CShims_amqp_BASIC_EXPIRATION_FLAG, \.expiration)
        set(properties.messageID, CShims_amqp_BASIC_MESSAGE_ID_FLAG, \.message_id)
        set(properties.type, CShims_amqp_BASIC_TYPE_FLAG, \.type)
        set(properties.userID, CShims_amqp_BASIC_USER_ID_FLAG, \.user_id)
        set(properties.appID, CShims_amqp_BASIC_APP_ID_FLAG, \.app_id)
        if !properties.headers.isEmpty {
            result.headers = table(properties.headers)
            flags |= CShims_amqp_BASIC_HEADERS_FLAG
        }
        if let mode = properties.deliveryMode {
            result.delivery_mode = mode.rawValue
            flags |= CShims_amqp_BASIC_DELIVERY_MODE_FLAG
        }
        if let priority = properties.priority {
            result.priority = priority
            flags |= CShims_amqp_BASIC_PRIORITY_FLAG
        }
        if let timestamp = properties.timestamp {
            result.timestamp = UInt64(max(0, timestamp.timeIntervalSince1970.rounded(.down)))
            flags |= CShims_amqp_BASIC_TIMESTAMP_FLAG
        }
        result._flags = flags
        return result
    }
}

@available(*, unavailable)
extension CArena: Sendable {}

// MARK: Decoding (copies everything out of rabbitmq-c's pools)

extension String {
    init(amqpBytes bytes: amqp_bytes_t) {
        guard bytes.len > 0, let base = bytes.bytes else {
            self = ""
            return
        }
        self = String(decoding: UnsafeRawBufferPointer(start: base, count: bytes.len), as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    init(amqpBytes bytes: amqp_bytes_t) {
        guard bytes.len > 0, let base = bytes.bytes else {
            self = []
            return
        }
        self = Array(UnsafeRawBufferPointer(start: base, count: bytes.len))
    }
}

extension AMQPValue {
    static func decode(_ table: amqp_table_t) -> [String: AMQPValue] {
        guard table.num_entries > 0, let entries = table.entries else { return [:] }
        var result: [String: AMQPValue] = [:]
        result.reserveCapacity(Int(table.num_entries))
        for index in 0..<Int(table.num_entries) {
            let entry = entries[index]
            result[String(amqpBytes: entry.key)] = AMQPValue(decoding: entry.value)
        }
        return result
    }

    init(decoding field: amqp_field_value_t) {
        func kind(_ kind: amqp_field_value_kind_t) -> UInt8 { UInt8(truncatingIfNeeded: kind.rawValue) }
        switch field.kind {
        case kind(AMQP_FIELD_KIND_BOOLEAN): self = .bool(field.value.boolean != 0)
        case kind(AMQP_FIELD_KIND_I8): self = .int32(Int32(field.value.i8))
        case kind(AMQP_FIELD_KIND_U8): self = .int32(Int32(field.value.u8))
        case kind(AMQP_FIELD_KIND_I16): self = .int32(Int32(field.value.i16))
        case kind(AMQP_FIELD_KIND_U16): self = .int32(Int32(field.value.u16))
        case kind(AMQP_FIELD_KIND_I32): self = .int32(field.value.i32)
        case kind(AMQP_FIELD_KIND_U32): self = .int64(Int64(field.value.u32))
        case kind(AMQP_FIELD_KIND_I64): self = .int64(field.value.i64)
        case kind(AMQP_FIELD_KIND_U64): self = .int64(Int64(clamping: field.value.u64))
        case kind(AMQP_FIELD_KIND_F32): self = .double(Double(field.value.f32))
        case kind(AMQP_FIELD_KIND_F64): self = .double(field.value.f64)
        case kind(AMQP_FIELD_KIND_DECIMAL):
            let decimal = field.value.decimal
            self = .double(Double(decimal.value) / pow(10, Double(decimal.decimals)))
        case kind(AMQP_FIELD_KIND_UTF8): self = .string(String(amqpBytes: field.value.bytes))
        case kind(AMQP_FIELD_KIND_BYTES): self = .bytes([UInt8](amqpBytes: field.value.bytes))
        case kind(AMQP_FIELD_KIND_TIMESTAMP):
            self = .timestamp(Date(timeIntervalSince1970: TimeInterval(field.value.u64)))
        case kind(AMQP_FIELD_KIND_TABLE): self = .table(AMQPValue.decode(field.value.table))
        case kind(AMQP_FIELD_KIND_ARRAY):
            let array = field.value.array
            var values: [AMQPValue] = []
            if array.num_entries > 0, let entries = array.entries {
                values.reserveCapacity(Int(array.num_entries))
                for index in 0..<Int(array.num_entries) { values.append(AMQPValue(decoding: entries[index])) }
            }
            self = .array(values)
        default: self = .void
        }
    }
}

extension RabbitMQMessageProperties {
    init(decoding properties: amqp_basic_properties_t) {
        let flags = properties._flags
        func string(_ flag: amqp_flags_t, _ bytes: amqp_bytes_t) -> String? {
            flags & flag != 0 ? String(amqpBytes: bytes) : nil
        }
        self.init(
            contentType: string(CShims_amqp_BASIC_CONTENT_TYPE_FLAG, properties.content_type),
            contentEncoding: string(CShims_amqp_BASIC_CONTENT_ENCODING_FLAG, properties.content_encoding),
            headers: flags & CShims_amqp_BASIC_HEADERS_FLAG != 0 ? AMQPValue.decode(properties.headers) : [:],
            deliveryMode: flags & CShims_amqp_BASIC_DELIVERY_MODE_FLAG != 0
                ? DeliveryMode(rawValue: properties.delivery_mode) : nil,
            priority: flags & CShims_amqp_BASIC_PRIORITY_FLAG != 0 ? properties.priority : nil,
            correlationID: string(CShims_amqp_BASIC_CORRELATION_ID_FLAG, properties.correlation_id),
            replyTo: string(CShims_amqp_BASIC_REPLY_TO_FLAG, properties.reply_to),
            expiration: string(CShims_amqp_BASIC_EXPIRATION_FLAG, properties.expiration),
            messageID: string(CShims_amqp_BASIC_MESSAGE_ID_FLAG, properties.message_id),
            timestamp: flags & CShims_amqp_BASIC_TIMESTAMP_FLAG != 0
                ? Date(timeIntervalSince1970: TimeInterval(properties.timestamp)) : nil,
            type: string(CShims_amqp_BASIC_TYPE_FLAG, properties.type),
            userID: string(CShims_amqp_BASIC_USER_ID_FLAG, properties.user_id),
            appID: string(CShims_amqp_BASIC_APP_ID_FLAG, properties.app_id)
        )
    }
}
