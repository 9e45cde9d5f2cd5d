import Foundation
import LiveDeliveryActivity
import LiveDeliveryTime
import Testing

@testable import LiveDeliveryCore

/// The app's side of the contract (the `LiveDeliveryActivity` product) against the worker's decoder: every
/// report the product makes is one the worker accepts, with the same values; every value the product refuses
/// to make a report of, the worker refuses too, naming the same field.
@Suite("App events: LiveDeliveryActivity against the worker's decoder")
struct AppEventContractTests {
    /// One report's fields as the app might pass them, at most one of them out of bounds.
    struct Candidate {
        var type: String
        var fields: [String: Any]
        var broken: String?
    }

    @Test func everyReportTheProductMakesIsAcceptedAndEveryOneItRefusesIsRefused() throws {
        var random = SplitMix64(seed: 53)
        var made = 0
        var refused = 0
        for index in 0..<4_000 {
            let candidate = Self.candidate(index, &random)
            let result = Result { () throws(EventContractError) in try Self.make(candidate) }
            switch result {
            case .success(let event):
                made += 1
                let body = try event.jsonData()
                let decoded = EventDecoder.decode(Array(body), routingKey: event.routingKey, messageID: event.eventID)
                guard case .success(let inbound) = decoded else {
                    Issue.record("the worker refused \(String(decoding: body, as: UTF8.self)): \(decoded)")
                    continue
                }
                try Self.expectSame(event, inbound)
                #expect(try JSONDecoder().decode(AppEvent.self, from: body) == event)
            case .failure(let error):
                refused += 1
                let body = try JSONSerialization.data(withJSONObject: candidate.fields)
                let decoded = EventDecoder.decode(Array(body))
                guard case .failure(let rejection) = decoded else {
                    Issue.record("the product refused (\(error)) what the worker accepts: \(candidate.fields)")
                    continue
                }
                #expect(rejection.field == error.field, "\(candidate.broken ?? "-"): \(rejection) vs \(error)")
                #expect(candidate.broken == error.field)
                // The product's decoder refuses the same body.
                #expect(throws: (any Error).self) { try JSONDecoder().decode(AppEvent.self, from: body) }
            }
        }
        #expect(made > 1_500 && refused > 1_500)
    }

    @Test func aReportDecodedByTheWorkerHasTheInstantTheAppSaw() throws {
        let seen = Date(timeIntervalSince1970: 1_795_255_445.123_456)
        let report = try ActivitySettingsReport(
            userID: "u-1", deviceID: "d-1", activitiesEnabled: true, frequentPushesEnabled: false, occurredAt: seen)
        let body = try AppEvent.settings(report).jsonData()
        let text = String(decoding: body, as: UTF8.self)
        #expect(text.contains(#""occurred_at":"2026-11-21T10:04:05.123Z""#))
        guard case .success(.activitySettings(let inbound)) = EventDecoder.decode(Array(body)) else {
            Issue.record("refused: \(text)")
            return
        }
        #expect(inbound.occurredAt == report.occurredAt)
    }

    @Test func tokensAreSentAsLowercaseHex() throws {
        let token = try PushToken(Data((0..<32).map { UInt8($0 * 8) }))
        #expect(token.hex == "0008101820283038404850586068707880889098a0a8b0b8c0c8d0d8e0e8f0f8")
        #expect(try PushToken(hex: token.hex.uppercased()) == token)
        #expect(throws: EventContractError.self) { try PushToken(Data(count: 15)) }
    }

    // MARK: - Candidates

    static let texts: [String] = ["a", "A-10023", "日本語", "🚚 order", "e\u{301}", String(repeating: "x", count: 40)]
    static let fieldLengths: [String: ClosedRange<Int>] = [
        "event_id": 1...128, "order_id": 1...64, "user_id": 1...64, "activity_id": 1...128, "device_id": 1...128,
        "bundle_id": 1...155, "attributes_type": 1...128,
    ]

    static func candidate(_ index: Int, _ random: inout SplitMix64) -> Candidate {
        let occurred = Date(timeIntervalSince1970: 1_795_000_000 + Double(random.next() % 100_000_000) / 1000)
        var fields: [String: Any] = [
            "version": 1, "event_id": "evt-\(index)", "occurred_at": RFC3339.format(occurred, fractional: true),
        ]
        let type: String
        switch index % 4 {
        case 0:
            type = ActivityTokenReport.type
            fields["order_id"] = text(&random)
            fields["activity_id"] = text(&random)
            if random.next() % 2 == 0 { fields["device_id"] = random.next() % 4 == 0 ? "  " : text(&random) }
            fields["token"] = hex(byteCount: [16, 32, 100, 200][Int(random.next() % 4)])
            fields["bundle_id"] = "com.example.app"
            fields["environment"] = random.next() % 2 == 0 ? "production" : "sandbox"
            if random.next() % 2 == 0 {
                let ahead = [0, 3_600, 604_799, 604_800][Int(random.next() % 4)]
                fields["scheduled_start"] = RFC3339.format(
                    Date(timeIntervalSince1970: occurred.timeIntervalSince1970.rounded(.down) + Double(ahead)))
            }
        case 1:
            type = PushToStartTokenReport.type
            fields["user_id"] = text(&random)
            fields["device_id"] = text(&random)
            fields["token"] = hex(byteCount: 80)
            fields["bundle_id"] = ["com.example.app", "a", "x-1.y"][Int(random.next() % 3)]
            fields["environment"] = "sandbox"
            fields["attributes_type"] = ["DeliveryAttributes", "App.Delivery_2"][Int(random.next() % 2)]
        case 2:
            type = ActivitySettingsReport.type
            fields["user_id"] = text(&random)
            fields["device_id"] = text(&random)
            fields["activities_enabled"] = random.next() % 2 == 0
            fields["frequent_pushes_enabled"] = random.next() % 2 == 0
        default:
            type = ActivityEndedReport.type
            fields["order_id"] = text(&random)
            fields["activity_id"] = text(&random)
            fields["reason"] = ActivityEndedReport.Reason.allCases[Int(random.next() % 3)].rawValue
        }
        fields["type"] = type
        var candidate = Candidate(type: type, fields: fields)
        if random.next() % 2 == 0 { breakOne(&candidate, &random) }
        return candidate
    }

    /// Puts one field out of bounds: too long (in characters or in bytes), empty, with U+0000, or of a
    /// form the contract refuses.
    static func breakOne(_ candidate: inout Candidate, _ random: inout SplitMix64) {
        let texts = candidate.fields.keys.filter { fieldLengths[$0] != nil && $0 != "device_id" }.sorted()
        var choices = texts.map { ($0, "text") }
        if candidate.fields["token"] != nil { choices.append(("token", "token")) }
        if candidate.fields["bundle_id"] != nil { choices.append(("bundle_id", "form")) }
        if candidate.fields["attributes_type"] != nil { choices.append(("attributes_type", "form")) }
        if candidate.fields["scheduled_start"] != nil { choices.append(("scheduled_start", "late")) }
        let (field, how) = choices[Int(random.next() % UInt64(choices.count))]
        let length = fieldLengths[field]
        switch how {
        case "token":
            candidate.fields[field] = hex(byteCount: [15, 201][Int(random.next() % 2)])
        case "form":
            candidate.fields[field] =
                field == "bundle_id"
                ? [".app", "app.", "a_b", "ü.app"][Int(random.next() % 4)]
                : ["Foo<Bar>", "a-b", "Delivery Attributes"][Int(random.next() % 3)]
        case "late":
            let occurred = RFC3339.parse(candidate.fields["occurred_at"] as! String)!
            candidate.fields[field] = RFC3339.format(
                Date(timeIntervalSince1970: occurred.timeIntervalSince1970.rounded(.down) + 604_801))
        default:
            let upper = length!.upperBound
            let bad: [String] = [
                "", String(repeating: "x", count: upper + 1), "a\u{0}b",
                // As many characters as allowed, but more than four UTF-8 bytes each.
                String(repeating: "e\u{301}\u{301}", count: upper),
            ]
            candidate.fields[field] = bad[Int(random.next() % UInt64(bad.count))]
        }
        candidate.broken = field
    }

    static func text(_ random: inout SplitMix64) -> String {
        if random.next() % 8 == 0 { return String(repeating: "y", count: 64) }
        return texts[Int(random.next() % UInt64(texts.count))]
    }

    static func hex(byteCount: Int) -> String {
        String((0..<byteCount).flatMap { _ in "ab" })
    }

    // MARK: - Making and comparing

    static func make(_ candidate: Candidate) throws(EventContractError) -> AppEvent {
        let f = candidate.fields
        let eventID = f["event_id"] as! String
        let occurredAt = RFC3339.parse(f["occurred_at"] as! String)!
        func string(_ key: String) -> String { f[key] as! String }
        switch candidate.type {
        case ActivityTokenReport.type:
            return .activityToken(
                try ActivityTokenReport(
                    orderID: string("order_id"), activityID: string("activity_id"), deviceID: f["device_id"] as? String,
                    token: try PushToken(hex: string("token")), bundleID: string("bundle_id"),
                    environment: PushEnvironment(rawValue: string("environment"))!,
                    scheduledStart: (f["scheduled_start"] as? String).flatMap(RFC3339.parse), eventID: eventID,
                    occurredAt: occurredAt))
        case PushToStartTokenReport.type:
            return .pushToStartToken(
                try PushToStartTokenReport(
                    userID: string("user_id"), deviceID: string("device_id"),
                    token: try PushToken(hex: string("token")),
                    bundleID: string("bundle_id"), environment: PushEnvironment(rawValue: string("environment"))!,
                    attributesType: string("attributes_type"), eventID: eventID, occurredAt: occurredAt))
        case ActivitySettingsReport.type:
            return .settings(
                try ActivitySettingsReport(
                    userID: string("user_id"), deviceID: string("device_id"),
                    activitiesEnabled: f["activities_enabled"] as! Bool,
                    frequentPushesEnabled: f["frequent_pushes_enabled"] as! Bool, eventID: eventID,
                    occurredAt: occurredAt))
        default:
            return .ended(
                try ActivityEndedReport(
                    orderID: string("order_id"), activityID: string("activity_id"),
                    reason: ActivityEndedReport.Reason(rawValue: string("reason"))!, eventID: eventID,
                    occurredAt: occurredAt))
        }
    }

    static func expectSame(_ event: AppEvent, _ inbound: InboundEvent) throws {
        #expect(inbound.eventID == event.eventID && inbound.type.rawValue == event.routingKey)
        #expect(inbound.orderID == event.orderID)
        switch (event, inbound) {
        case (.activityToken(let a), .activityToken(let w)):
            #expect(
                w.orderID == a.orderID && w.activityID == a.activityID && w.deviceID == a.deviceID
                    && w.token.hex == a.token.hex && w.bundleID == a.bundleID
                    && w.environment.rawValue == a.environment.rawValue && w.scheduledStart == a.scheduledStart
                    && w.occurredAt == a.occurredAt)
        case (.pushToStartToken(let a), .pushToStartToken(let w)):
            #expect(
                w.userID == a.userID && w.deviceID == a.deviceID && w.token.hex == a.token.hex
                    && w.bundleID == a.bundleID && w.environment.rawValue == a.environment.rawValue
                    && w.attributesType == a.attributesType && w.occurredAt == a.occurredAt)
        case (.settings(let a), .activitySettings(let w)):
            #expect(
                w.userID == a.userID && w.deviceID == a.deviceID && w.activitiesEnabled == a.activitiesEnabled
                    && w.frequentPushesEnabled == a.frequentPushesEnabled && w.occurredAt == a.occurredAt)
        case (.ended(let a), .activityEnded(let w)):
            #expect(
                w.orderID == a.orderID && w.activityID == a.activityID && w.reason.rawValue == a.reason.rawValue
                    && w.occurredAt == a.occurredAt)
        default:
            Issue.record("\(event.routingKey) decoded as \(inbound.type)")
        }
    }
}
