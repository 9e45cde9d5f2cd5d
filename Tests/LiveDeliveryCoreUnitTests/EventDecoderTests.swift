import Foundation
import LiveDeliveryTime
import Testing

@testable import LiveDeliveryCore

@Suite("Event decoding and validation")
struct EventDecoderTests {
    static var validStatus: [String: Any] {
        Fixtures.statusObject("out_for_delivery", seq: 7, minute: 4, id: "evt-7d1c7e1e", courier: "Sam", eta: (20, 30))
    }

    static func with(_ change: (inout [String: Any]) -> Void, base: [String: Any] = validStatus) -> [UInt8] {
        var object = base
        change(&object)
        return Fixtures.json(object)
    }

    /// The valid status event's JSON with `member` (raw JSON text) added first; a byte `\u{FF}` in it stays one byte.
    static func withText(_ member: String) -> [UInt8] {
        let body = Array(Fixtures.json(validStatus).dropFirst())
        let raw = member.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
        return [UInt8(ascii: "{")] + raw + [UInt8(ascii: ",")] + body
    }

    static var tokenBase: [String: Any] {
        [
            "type": "activity.token", "version": 1, "event_id": "e1", "occurred_at": "2026-11-21T10:04:05Z",
            "order_id": "A-10023", "activity_id": "ACT", "token": Fixtures.updateHex, "bundle_id": "com.example.app",
            "environment": "production",
        ]
    }
    static var startBase: [String: Any] {
        [
            "type": "activity.push_to_start_token", "version": 1, "event_id": "e2",
            "occurred_at": "2026-11-21T10:04:05Z", "user_id": "u-1", "device_id": "d-1",
            "token": Fixtures.pushToStartHex,
            "bundle_id": "com.example.app", "environment": "sandbox", "attributes_type": "DeliveryAttributes",
        ]
    }
    static var endedBase: [String: Any] {
        [
            "type": "activity.ended", "version": 1, "event_id": "e3", "occurred_at": "2026-11-21T10:04:05Z",
            "order_id": "A-10023", "activity_id": "ACT", "reason": "dismissed_by_user",
        ]
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var reason: EventRejection.Reason
        var field: String?
        var testDescription: String { name }
    }

    static let rejections: [Case] = [
        Case(name: "over 64 KiB", bytes: Array(repeating: UInt8(ascii: " "), count: 65_537), reason: .bodyTooLarge),
        Case(name: "not JSON", bytes: Array("{\"type\": ".utf8), reason: .malformedJSON),
        Case(name: "not UTF-8", bytes: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], reason: .malformedJSON),
        Case(name: "top-level array", bytes: Array("[1,2]".utf8), reason: .malformedJSON),
        // Wherever they are, read or not, as a full parse refuses them.
        Case(name: "not UTF-8 in an unknown field", bytes: withText("\"x\":\"\u{FF}\""), reason: .malformedJSON),
        Case(
            name: "a lone surrogate in an unknown field", bytes: withText("\"x\":\"\\ud800\""),
            reason: .malformedJSON),
        Case(name: "a bad escape in an unknown key", bytes: withText("\"\\ud800x\":1"), reason: .malformedJSON),
        Case(name: "an infinite number in an unknown field", bytes: withText("\"x\":1e999"), reason: .malformedJSON),
        Case(
            name: "a 400-digit number in an unknown field",
            bytes: withText("\"x\":" + String(repeating: "9", count: 400)), reason: .malformedJSON),
        Case(name: "missing type", bytes: with { $0["type"] = nil }, reason: .missingField, field: "type"),
        Case(name: "type not a string", bytes: with { $0["type"] = 3 }, reason: .invalidField, field: "type"),
        Case(name: "unknown type", bytes: with { $0["type"] = "order.created" }, reason: .unknownType, field: "type"),
        Case(name: "missing version", bytes: with { $0["version"] = nil }, reason: .missingField, field: "version"),
        Case(name: "version as string", bytes: with { $0["version"] = "1" }, reason: .invalidField, field: "version"),
        Case(name: "version 2", bytes: with { $0["version"] = 2 }, reason: .unknownVersion, field: "version"),
        Case(name: "missing event_id", bytes: with { $0["event_id"] = nil }, reason: .missingField, field: "event_id"),
        Case(name: "empty event_id", bytes: with { $0["event_id"] = "" }, reason: .invalidField, field: "event_id"),
        Case(
            name: "event_id over 128", bytes: with { $0["event_id"] = String(repeating: "x", count: 129) },
            reason: .invalidField, field: "event_id"),
        Case(
            name: "missing occurred_at", bytes: with { $0["occurred_at"] = nil }, reason: .missingField,
            field: "occurred_at"),
        Case(
            name: "occurred_at without offset", bytes: with { $0["occurred_at"] = "2026-11-21T10:04:05" },
            reason: .invalidTimestamp, field: "occurred_at"),
        Case(
            name: "occurred_at impossible date", bytes: with { $0["occurred_at"] = "2026-02-30T10:04:05Z" },
            reason: .invalidTimestamp, field: "occurred_at"),
        Case(
            name: "occurred_at as number", bytes: with { $0["occurred_at"] = 1_795_255_290 },
            reason: .invalidTimestamp, field: "occurred_at"),
        Case(
            // Valid RFC 3339 read where it lies, but longer than a timestamp may be.
            name: "occurred_at of 65 characters",
            bytes: with { $0["occurred_at"] = "2026-11-21T10:04:05." + String(repeating: "0", count: 44) + "Z" },
            reason: .invalidTimestamp, field: "occurred_at"),
        Case(name: "missing order_id", bytes: with { $0["order_id"] = nil }, reason: .missingField, field: "order_id"),
        Case(
            name: "order_id over 64", bytes: with { $0["order_id"] = String(repeating: "o", count: 65) },
            reason: .invalidField, field: "order_id"),
        Case(
            // One character: an "o" carrying 300 combining marks, far past what an index row of ids holds.
            name: "order_id of one character and 601 bytes",
            bytes: with { $0["order_id"] = "o" + String(repeating: "\u{0301}", count: 300) },
            reason: .invalidField, field: "order_id"),
        Case(
            name: "NUL in order_id", bytes: with { $0["order_id"] = "A-1\u{0000}0023" }, reason: .invalidField,
            field: "order_id"),
        Case(
            name: "NUL in a courier's name", bytes: with { $0["courier"] = ["name": "Sam\u{0000}"] },
            reason: .invalidField, field: "courier.name"),
        Case(
            name: "NUL in an event_id", bytes: with { $0["event_id"] = "\u{0000}" }, reason: .invalidField,
            field: "event_id"),
        Case(name: "missing user_id", bytes: with { $0["user_id"] = nil }, reason: .missingField, field: "user_id"),
        Case(name: "missing status", bytes: with { $0["status"] = nil }, reason: .missingField, field: "status"),
        Case(name: "unknown status", bytes: with { $0["status"] = "lost" }, reason: .unknownStatus, field: "status"),
        Case(
            name: "sequence as string", bytes: with { $0["sequence"] = "7" }, reason: .invalidField, field: "sequence"),
        Case(name: "negative sequence", bytes: with { $0["sequence"] = -1 }, reason: .invalidField, field: "sequence"),
        Case(
            name: "fractional sequence", bytes: with { $0["sequence"] = 7.5 }, reason: .invalidField, field: "sequence"),
        Case(
            name: "order_number as string", bytes: with { $0["order_number"] = "10023" }, reason: .invalidField,
            field: "order_number"),
        Case(
            name: "merchant not an object", bytes: with { $0["merchant"] = "Pizza" }, reason: .invalidField,
            field: "merchant"),
        Case(
            name: "courier name over 100", bytes: with { $0["courier"] = ["name": String(repeating: "é", count: 101)] },
            reason: .invalidField, field: "courier.name"),
        Case(
            name: "courier name a number", bytes: with { $0["courier"] = ["name": 5] }, reason: .invalidField,
            field: "courier.name"),
        Case(
            name: "eta wrong way round",
            bytes: with { $0["eta"] = ["earliest": "2026-11-21T10:30:00Z", "latest": "2026-11-21T10:20:00Z"] },
            reason: .invalidETARange, field: "eta"),
        Case(
            name: "eta missing latest", bytes: with { $0["eta"] = ["earliest": "2026-11-21T10:30:00Z"] },
            reason: .missingField, field: "eta.latest"),
        Case(
            name: "eta bad timestamp",
            bytes: with { $0["eta"] = ["earliest": "soon", "latest": "2026-11-21T10:20:00Z"] },
            reason: .invalidTimestamp, field: "eta.earliest"),
        Case(
            name: "token missing", bytes: with({ $0["token"] = nil }, base: tokenBase), reason: .missingField,
            field: "token"),
        Case(
            name: "token not hex", bytes: with({ $0["token"] = String(repeating: "zz", count: 32) }, base: tokenBase),
            reason: .invalidToken, field: "token"),
        Case(
            name: "token odd length", bytes: with({ $0["token"] = String(repeating: "a", count: 65) }, base: tokenBase),
            reason: .invalidToken, field: "token"),
        Case(
            name: "token under 16 bytes",
            bytes: with({ $0["token"] = String(repeating: "ab", count: 15) }, base: tokenBase),
            reason: .invalidToken, field: "token"),
        Case(
            name: "token over 200 bytes",
            bytes: with({ $0["token"] = String(repeating: "ab", count: 201) }, base: tokenBase),
            reason: .invalidToken, field: "token"),
        Case(
            name: "unknown environment", bytes: with({ $0["environment"] = "staging" }, base: tokenBase),
            reason: .invalidField, field: "environment"),
        Case(
            name: "bad bundle id", bytes: with({ $0["bundle_id"] = "com example" }, base: tokenBase),
            reason: .invalidField, field: "bundle_id"),
        Case(
            name: "missing activity_id", bytes: with({ $0["activity_id"] = nil }, base: tokenBase),
            reason: .missingField, field: "activity_id"),
        Case(
            name: "device_id of 129 characters' bytes",
            bytes: with({ $0["device_id"] = "d" + String(repeating: "\u{0301}", count: 256) }, base: tokenBase),
            reason: .invalidField, field: "device_id"),
        Case(
            name: "scheduled_start not a timestamp",
            bytes: with({ $0["scheduled_start"] = "tonight" }, base: tokenBase),
            reason: .invalidTimestamp, field: "scheduled_start"),
        Case(
            name: "scheduled_start a number", bytes: with({ $0["scheduled_start"] = 1_795_000_000 }, base: tokenBase),
            reason: .invalidTimestamp, field: "scheduled_start"),
        Case(
            name: "scheduled_start in year 9999",
            bytes: with({ $0["scheduled_start"] = "9999-12-31T23:59:59Z" }, base: tokenBase),
            reason: .invalidField, field: "scheduled_start"),
        Case(
            name: "push-to-start without device", bytes: with({ $0["device_id"] = nil }, base: startBase),
            reason: .missingField, field: "device_id"),
        Case(
            name: "push-to-start without attributes type",
            bytes: with({ $0["attributes_type"] = nil }, base: startBase),
            reason: .missingField, field: "attributes_type"),
        Case(
            name: "attributes type not a type name",
            bytes: with({ $0["attributes_type"] = "Delivery Attributes" }, base: startBase),
            reason: .invalidField, field: "attributes_type"),
        Case(
            name: "unknown end reason", bytes: with({ $0["reason"] = "crashed" }, base: endedBase),
            reason: .invalidField, field: "reason"),
        Case(
            name: "missing end reason", bytes: with({ $0["reason"] = nil }, base: endedBase), reason: .missingField,
            field: "reason"),
    ]

    @Test("rejections carry a specific reason and the offending field", arguments: rejections)
    func rejection(_ c: Case) {
        guard case .failure(let rejection) = EventDecoder.decode(c.bytes) else {
            Issue.record("accepted: \(c.name)")
            return
        }
        #expect(rejection.reason == c.reason)
        #expect(rejection.field == c.field)
        #expect(!rejection.message.isEmpty)
    }

    @Test func everyReasonIsExercised() {
        // The routing key and message id are the broker's; the apps and the cells' routing header are the
        // worker's (EventProcessor; OrderRoutingTests).
        let covered = Set(Self.rejections.map(\.reason)).union([
            .routingKeyMismatch, .messageIDMismatch, .unknownApp, .cellRoutingHeader,
        ])
        #expect(covered == Set(EventRejection.Reason.all))
    }

    @Test func messagesNeverContainTheToken() {
        let secret = String(repeating: "9f", count: 31) + "zz"
        guard
            case .failure(let rejection) = EventDecoder.decode(
                Self.with({ $0["token"] = secret }, base: Self.tokenBase))
        else {
            Issue.record("accepted")
            return
        }
        #expect(!rejection.description.contains("9f9f9f"))
        let token = DeviceToken(hex: Fixtures.updateHex)!
        #expect(!token.description.contains(Fixtures.updateHex))
        #expect(token.description.hasPrefix("b2b2b2b2"))
    }

    @Test func routingKeyAndMessageIDMustMatch() {
        let bytes = Fixtures.json(Self.validStatus)
        guard case .failure(let a) = EventDecoder.decode(bytes, routingKey: "activity.token") else {
            Issue.record("accepted")
            return
        }
        #expect(a.reason == .routingKeyMismatch)
        guard case .failure(let b) = EventDecoder.decode(bytes, routingKey: "order.status", messageID: "other") else {
            Issue.record("accepted")
            return
        }
        #expect(b.reason == .messageIDMismatch)
        #expect((try? EventDecoder.decode(bytes, routingKey: "order.status", messageID: "evt-7d1c7e1e").get()) != nil)
    }

    /// A token is hex digits only, of either case (kept in lowercase): every other byte is refused wherever it is.
    @Test func deviceTokensAreHexOfEitherCase() {
        let base = Array(Fixtures.updateHex.utf8)
        for byte in UInt8.min...UInt8.max {
            for position in [0, base.count / 2, base.count - 1] {
                var bytes = base
                bytes[position] = byte
                let token = DeviceToken(hex: String(decoding: bytes, as: UTF8.self))
                let isHex = (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
                #expect((token != nil) == isHex, "byte \(byte) at \(position)")
                if let token { #expect(token.hex == String(decoding: bytes, as: UTF8.self).lowercased()) }
            }
        }
    }

    /// A timestamp is read from the body's bytes when it holds no escape; one written with escapes, or of exactly
    /// 64 characters, is the same instant either way.
    @Test func timestampsReadTheSameEscapedOrNot() throws {
        func occurredAt(_ raw: String) throws -> Date {
            let bytes = Self.withText("\"occurred_at\":\"\(raw)\"")
            return try EventDecoder.decode(bytes).get().occurredAt
        }
        let plain = try occurredAt("2026-11-21T10:04:05.25Z")
        #expect(plain == RFC3339.parse("2026-11-21T10:04:05.25Z"))
        #expect(try occurredAt("2026-11-21T10:04:05.25\\u005a") == plain)
        #expect(try occurredAt("2026\\u002d11-21T10:04:05.25+00:00") == plain)
        #expect(try occurredAt("2026-11-21T10:04:05.25" + String(repeating: "0", count: 41) + "Z") == plain)
    }

    @Test func decodesTheContractExample() throws {
        let text = """
            {"type": "order.status", "version": 1,
             "event_id": "evt-7d1c7e1e", "occurred_at": "2026-11-21T10:04:05Z",
             "order_id": "A-10023", "user_id": "u-991", "sequence": 7,
             "status": "out_for_delivery", "order_number": 10023,
             "merchant": { "name": "Pizza Place" }, "courier":  { "name": "Sam" },
             "eta": { "earliest": "2026-11-21T10:20:00Z", "latest": "2026-11-21T10:30:00Z" },
             "future_field": {"anything": [1, 2]}}
            """
        guard case .orderStatus(let e) = try EventDecoder.decode(Array(text.utf8)).get() else {
            Issue.record("wrong type")
            return
        }
        #expect(e.eventID == "evt-7d1c7e1e")
        #expect(e.sequence == 7)
        #expect(e.status == .outForDelivery)
        #expect(e.orderNumber == 10023)
        #expect(e.merchantName == "Pizza Place")
        #expect(e.courierName == "Sam")
        #expect(e.occurredAt == RFC3339.parse("2026-11-21T10:04:05Z"))
        #expect(
            e.eta
                == ETAWindow(
                    earliest: RFC3339.parse("2026-11-21T10:20:00Z")!, latest: RFC3339.parse("2026-11-21T10:30:00Z")!))
    }

    @Test func emptyNullAndMissingOptionalFieldsAreAbsent() throws {
        let bytes = Self.with {
            $0["sequence"] = NSNull()
            $0["order_number"] = nil
            $0["merchant"] = ["name": "   "]
            $0["courier"] = NSNull()
            $0["eta"] = NSNull()
        }
        guard case .orderStatus(let e) = try EventDecoder.decode(bytes).get() else {
            Issue.record("wrong type")
            return
        }
        #expect(
            e.sequence == nil && e.orderNumber == nil && e.merchantName == nil && e.courierName == nil && e.eta == nil)
    }

    @Test func unicodeNamesUpTo100Characters() throws {
        let name = String(repeating: "👩‍👩‍👧‍👦", count: 100)
        let bytes = Self.with { $0["courier"] = ["name": name] }
        guard case .orderStatus(let e) = try EventDecoder.decode(bytes).get() else {
            Issue.record("wrong type")
            return
        }
        #expect(e.courierName == name)
    }

    @Test func bodyOfExactly64KiBIsParsed() {
        var bytes = Fixtures.json(Self.validStatus)
        bytes.removeLast()
        bytes +=
            Array(repeating: UInt8(ascii: " "), count: EventDecoder.maximumBodySize - bytes.count - 1) + [
                UInt8(ascii: "}")
            ]
        #expect(bytes.count == EventDecoder.maximumBodySize)
        #expect((try? EventDecoder.decode(bytes).get()) != nil)
    }

    @Test func otherEventTypes() throws {
        guard
            case .activityToken(let t) = try EventDecoder.decode(
                Self.with({ $0["token"] = Fixtures.updateHex.uppercased() }, base: Self.tokenBase)
            ).get()
        else {
            Issue.record("wrong type")
            return
        }
        #expect(t.token.hex == Fixtures.updateHex)
        #expect(t.environment == .production && t.deviceID == nil)
        guard case .pushToStartToken(let p) = try EventDecoder.decode(Fixtures.json(Self.startBase)).get() else {
            Issue.record("wrong type")
            return
        }
        #expect(p.attributesType == "DeliveryAttributes" && p.deviceID == "d-1")
        guard case .activityEnded(let e) = try EventDecoder.decode(Fixtures.json(Self.endedBase)).get() else {
            Issue.record("wrong type")
            return
        }
        #expect(e.reason == .dismissedByUser)
    }
}

@Suite("RFC 3339")
struct RFC3339Tests {
    @Test(
        arguments: [
            ("2026-11-21T10:04:05Z", 1_795_255_445.0),
            ("2026-11-21t10:04:05z", 1_795_255_445.0),
            ("2026-11-21 10:04:05Z", 1_795_255_445.0),
            ("2026-11-21T12:04:05+02:00", 1_795_255_445.0),
            ("2026-11-21T05:34:05-04:30", 1_795_255_445.0),
            ("2026-11-21T10:04:05.250Z", 1_795_255_445.25),
            ("2024-02-29T00:00:00Z", 1_709_164_800.0),
            ("1970-01-01T00:00:00Z", 0.0),
            ("2016-12-31T23:59:60Z", 1_483_228_800.0),
        ])
    func parses(_ text: String, _ unix: Double) {
        #expect(RFC3339.parse(text)?.timeIntervalSince1970 == unix)
    }

    @Test(
        arguments: [
            "", "2026-11-21", "2026-11-21T10:04:05", "2026-11-21T10:04Z", "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21T10:04:05.Z", "2026-11-21T10:04:05+0200",
            "2026-11-21T10:04:05Z ", "20261121T100405Z",
        ])
    func rejects(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }

    @Test func formatsRoundTrip() {
        let date = RFC3339.parse("2026-11-21T10:04:05Z")!
        #expect(RFC3339.format(date) == "2026-11-21T10:04:05Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59Z")
    }
}
