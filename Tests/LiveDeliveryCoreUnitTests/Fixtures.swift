import APNsModel
import Foundation
import LiveDeliveryActivity
import LiveDeliveryJSON
import LiveDeliveryTime
import Testing

@testable import LiveDeliveryCore

/// Shared builders: the shipped configuration, events as JSON, and payload decoding.
enum Fixtures {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func bytes(_ relativePath: String) -> [UInt8] {
        Array((try? Data(contentsOf: root.appendingPathComponent(relativePath))) ?? Data())
    }

    /// The shipped Config/ files.
    static let configuration: TrackingConfiguration = {
        do {
            return try DefaultConfiguration.load(
                policyJSON: bytes("Config/policy.json"), mappingJSON: bytes("Config/content-mapping.json"))
        } catch {
            fatalError("the shipped configuration does not load: \(error)")
        }
    }()

    static func tracker(_ change: (inout Policy) -> Void = { _ in }) -> OrderTracker {
        var configuration = configuration
        change(&configuration.policy)
        return OrderTracker(configuration: configuration)
    }

    static let t0 = RFC3339.parse("2026-11-21T10:00:00Z")!
    static func at(_ minutes: Double) -> Date { t0.addingTimeInterval(minutes * 60) }
    static func iso(_ minutes: Double) -> String { RFC3339.format(at(minutes)) }

    static let pushToStartHex = String(repeating: "a1", count: 32)
    static let updateHex = String(repeating: "b2", count: 32)
    static let rotatedHex = String(repeating: "c3", count: 32)

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func decode(_ object: [String: Any]) -> InboundEvent {
        switch EventDecoder.decode(json(object)) {
        case .success(let event): return event
        case .failure(let rejection): fatalError("fixture event rejected: \(rejection)")
        }
    }

    static func statusObject(
        _ status: String, seq: Int?, minute: Double, id: String? = nil, order: String = "A-10023",
        courier: String? = nil, eta: (Double, Double)? = nil, merchant: String? = "Pizza Place"
    ) -> [String: Any] {
        var object: [String: Any] = [
            "type": "order.status", "version": 1, "event_id": id ?? "evt-\(status)-\(seq ?? Int(minute))",
            "occurred_at": iso(minute), "order_id": order, "user_id": "u-991", "status": status,
            "order_number": 10023,
        ]
        if let seq { object["sequence"] = seq }
        if let merchant { object["merchant"] = ["name": merchant] }
        if let courier { object["courier"] = ["name": courier] }
        if let eta { object["eta"] = ["earliest": iso(eta.0), "latest": iso(eta.1)] }
        return object
    }

    static func status(
        _ status: String, seq: Int?, minute: Double, id: String? = nil, courier: String? = nil,
        eta: (Double, Double)? = nil, merchant: String? = "Pizza Place"
    ) -> InboundEvent {
        decode(statusObject(status, seq: seq, minute: minute, id: id, courier: courier, eta: eta, merchant: merchant))
    }

    static func token(
        _ hex: String = updateHex, minute: Double, id: String? = nil, activity: String = "ACT-1",
        device: String? = "iphone", order: String = "A-10023"
    ) -> InboundEvent {
        var object: [String: Any] = [
            "type": "activity.token", "version": 1, "event_id": id ?? "evt-token-\(hex.prefix(4))-\(minute)",
            "occurred_at": iso(minute), "order_id": order, "activity_id": activity, "token": hex,
            "bundle_id": "com.example.pizza", "environment": "sandbox",
        ]
        if let device { object["device_id"] = device }
        return decode(object)
    }

    static func registration(
        device: String = "iphone", hex: String = pushToStartHex, type: String = "DeliveryAttributes",
        minute: Double = -30
    ) -> PushToStartRegistration {
        guard
            case .pushToStartToken(let e) = decode([
                "type": "activity.push_to_start_token", "version": 1, "event_id": "evt-p2s-\(device)-\(minute)",
                "occurred_at": iso(minute), "user_id": "u-991", "device_id": device, "token": hex,
                "bundle_id": "com.example.pizza", "environment": "sandbox", "attributes_type": type,
            ])
        else { fatalError() }
        return e.registration
    }

    static func ended(_ reason: String, minute: Double, activity: String = "ACT-1") -> InboundEvent {
        decode([
            "type": "activity.ended", "version": 1, "event_id": "evt-ended-\(activity)-\(minute)",
            "occurred_at": iso(minute), "order_id": "A-10023", "activity_id": activity, "reason": reason,
        ])
    }

    /// Runs events through the tracker as the worker would, recording every push as accepted.
    struct Run {
        let tracker: OrderTracker
        var state: OrderState
        var context: TrackingContext
        var pushes: [PlannedPush] = []
        var decisions: [Decision] = []
        var accept = true

        init(tracker: OrderTracker = Fixtures.tracker(), context: TrackingContext = TrackingContext()) {
            self.tracker = tracker
            self.state = OrderState(orderID: "A-10023", now: Fixtures.t0)
            self.context = context
        }

        @discardableResult
        mutating func apply(_ event: InboundEvent, at minute: Double? = nil) -> Step {
            let now = minute.map(Fixtures.at) ?? event.occurredAt
            let step = tracker.apply(event, to: state, context: context, now: now)
            absorb(step, now: now)
            return step
        }

        @discardableResult
        mutating func sweep(at minute: Double) -> Step {
            let step = tracker.sweep(state, context: context, now: Fixtures.at(minute))
            absorb(step, now: Fixtures.at(minute))
            return step
        }

        mutating func absorb(_ step: Step, now: Date) {
            state = step.state
            pushes += step.pushes
            decisions += step.decisions
            guard accept else { return }
            for push in step.pushes {
                let recorded = tracker.record(.accepted, for: push, in: state, now: max(now, push.notBefore))
                state = recorded.state
                decisions += recorded.decisions
            }
        }

        var activity: ActivityState { state.activities[0] }
    }
}

/// The `aps` dictionary of a push, parsed.
func aps(_ push: PlannedPush) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(push.payload)) as? [String: Any]
    return try #require(object?["aps"] as? [String: Any])
}

/// The payload as ActivityKit reads it: `aps.content-state` and `aps.attributes`, decoded from the
/// exact bytes with a default `JSONDecoder`.
struct AppPayload: Decodable {
    struct APS: Decodable {
        var contentState: DeliveryAttributes.ContentState
        var attributes: DeliveryAttributes?
        enum CodingKeys: String, CodingKey {
            case contentState = "content-state"
            case attributes
        }
    }
    var aps: APS
}

func decodeApp(_ push: PlannedPush) throws -> (DeliveryAttributes.ContentState, DeliveryAttributes?) {
    let payload = try JSONDecoder().decode(AppPayload.self, from: Data(push.payload))
    return (payload.aps.contentState, payload.aps.attributes)
}

extension PlannedPush {
    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

extension Array where Element == Decision {
    func codes(_ activity: String? = nil) -> [String] {
        filter { activity == nil || $0.activityKey == activity }.map(\.code.rawValue)
    }
}
