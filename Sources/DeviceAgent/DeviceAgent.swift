package import APNsSimulator
package import Foundation
package import LiveDeliveryActivity
package import Logging
package import RabbitMQ
import Synchronization

/// The app on the simulated phones, as far as the worker can tell (`apns-sim --agent-knows FILE`).
///
/// When a push-to-start starts an activity on a phone, the app learns the activity's id and its update token
/// (ActivityKit's `pushTokenUpdates`) and reports them as `activity.token`, with the order's id, which it knows
/// from its own data. The agent does the same through the broker, with the app's own types
/// (`LiveDeliveryActivity`): it decodes the start's `aps.attributes` into `DeliveryAttributes`, looks the
/// order number up, and publishes the report with publisher confirms to the events exchange.
///
/// What the app knows is what the event files it was given say (``Knowledge``): each push-to-start token's
/// device and app, and each order's number. A start for an order it does not know is not reported, as an app
/// that lost track of its order would not report it: the worker's sweeper ends that activity.
package final class DeviceAgent: Sendable {
    /// What the app on the phones knows about itself: its push-to-start tokens, and its user's orders.
    package struct Knowledge: Sendable {
        package struct Device: Sendable, Hashable {
            package var deviceID: String?
            package var bundleID: String
            package var environment: PushEnvironment
        }

        /// By push-to-start token (lower-case hex).
        package var devices: [String: Device] = [:]
        /// Order number → order id.
        package var orders: [Int: String] = [:]

        package init() {}

        /// Reads JSON-lines event files (`examples/demo/*.jsonl`): `activity.push_to_start_token` lines give the
        /// devices, `order.status` lines the orders' numbers. Other lines are skipped; a line that is not JSON
        /// is an error naming its file and line.
        package init(files: [URL]) throws {
            for file in files {
                let text = try String(contentsOf: file, encoding: .utf8)
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                for (index, line) in lines where !line.allSatisfy(\.isWhitespace) {
                    guard
                        let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                    else {
                        throw DeviceAgentError("\(file.lastPathComponent):\(index + 1): not a JSON object")
                    }
                    learn(event)
                }
            }
        }

        private mutating func learn(_ event: [String: Any]) {
            switch event["type"] as? String {
            case "activity.push_to_start_token":
                guard let token = event["token"] as? String, let bundleID = event["bundle_id"] as? String else {
                    return
                }
                devices[token.lowercased()] = Device(
                    deviceID: event["device_id"] as? String, bundleID: bundleID,
                    environment: (event["environment"] as? String).flatMap(PushEnvironment.init) ?? .production)
            case "order.status":
                guard let orderID = event["order_id"] as? String, let number = event["order_number"] as? Int else {
                    return
                }
                orders[number] = orderID
            default:
                return
            }
        }
    }

    /// What the agent made of one start.
    package enum Outcome: Sendable, Hashable {
        /// Published and confirmed: the `activity.token` event's id.
        case reported(eventID: String)
        /// The app knows no order with the start's order number (or the start carried none): nothing reported.
        case unknownOrder(Int?)
        /// The start went to a push-to-start token the app does not know: nothing reported.
        case unknownDevice
        /// The broker did not confirm the report after every attempt.
        case failed(String)
    }

    private let knowledge: Knowledge
    private let endpoints: AMQPEndpoints
    private let exchange: String
    private let logger: Logger
    private let publisher = Mutex<RabbitMQPublisher?>(nil)

    package init(knowledge: Knowledge, endpoints: AMQPEndpoints, exchange: String, logger: Logger) {
        self.knowledge = knowledge
        self.endpoints = endpoints
        self.exchange = exchange
        self.logger = logger
    }

    /// Reports each start of `starts` in turn until the stream finishes; `outcome` hears what became of each.
    package func run(_ starts: AsyncStream<PushRecord>, outcome: @Sendable (Outcome) -> Void = { _ in }) async {
        for await start in starts {
            outcome(await report(start))
        }
        await publisher.withLock { $0.take() }?.close()
    }

    /// What the app does about one start: report it, or not (with what became of it and why).
    package enum Plan: Sendable {
        case report(AppEvent)
        case skip(Outcome, why: String)
    }

    /// The `activity.token` report the app makes for `start`, or why it makes none.
    package func plan(_ start: PushRecord) -> Plan {
        guard let activityID = start.activityID, let updateToken = start.issuedUpdateToken else {
            return .skip(.unknownDevice, why: "no activity was started")
        }
        guard let device = knowledge.devices[start.deviceToken.lowercased()] else {
            return .skip(.unknownDevice, why: "the push-to-start token is not one the app reported")
        }
        let number = (try? JSONDecoder().decode(StartPayload.self, from: Data(start.payload.utf8)))?.aps.attributes
            .orderNumber
        guard let number, let orderID = knowledge.orders[number] else {
            return .skip(
                .unknownOrder(number),
                why: number.map { "the app knows no order number \($0)" } ?? "the attributes carry no order number")
        }
        do {
            let report = try ActivityTokenReport(
                orderID: orderID, activityID: activityID, deviceID: device.deviceID,
                token: try PushToken(hex: updateToken), bundleID: device.bundleID, environment: device.environment,
                eventID: "app-token-\(activityID)")
            return .report(.activityToken(report))
        } catch {
            return .skip(.failed("\(error)"), why: "the report would break the contract: \(error)")
        }
    }

    private func report(_ start: PushRecord) async -> Outcome {
        let activity = start.activityID ?? "?"
        switch plan(start) {
        case .skip(let outcome, let why):
            logger.notice("device agent: no report for activity \(activity): \(why)")
            return outcome
        case .report(let event):
            var last = ""
            for attempt in 1...5 {
                do {
                    try await publish(event)
                    logger.info(
                        "device agent: reported activity.token of order \(event.orderID ?? "?") (activity \(activity), token \(Self.redacted(start.issuedUpdateToken)))"
                    )
                    return .reported(eventID: event.eventID)
                } catch {
                    last = "\(error)"
                    logger.warning(
                        "device agent: report of activity \(activity) not confirmed (\(attempt)/5): \(error)")
                    try? await Task.sleep(for: .milliseconds(200 * attempt))
                }
            }
            return .failed(last)
        }
    }

    /// Publishes on the agent's one publisher, connecting it first; after a connection-level error the next
    /// report connects again.
    private func publish(_ event: AppEvent) async throws {
        let body = Array(try event.jsonData())
        let current: RabbitMQPublisher
        if let open = publisher.withLock({ $0 }), open.isOpen {
            current = open
        } else {
            current = try await RabbitMQPublisher.connect(to: endpoints, logger: logger).publisher
            publisher.withLock { $0 = current }
        }
        try await current.publish(
            exchange: exchange, routingKey: event.routingKey, body: body,
            properties: RabbitMQMessageProperties(
                contentType: "application/json",
                // The cells' hash exchange routes an order's event by this header (docs/scaling.md).
                headers: event.orderID.map { ["order_id": .string($0)] } ?? [:],
                deliveryMode: .persistent, messageID: event.eventID),
            mandatory: true)
    }

    /// A token as logs may show it: its first 8 characters.
    static func redacted(_ token: String?) -> String {
        guard let token else { return "none" }
        return String(token.prefix(8)) + "…"
    }

    private struct StartPayload: Decodable {
        struct APS: Decodable { var attributes: DeliveryAttributes }
        var aps: APS
    }
}

/// A knowledge file the agent cannot read. Never holds a token.
package struct DeviceAgentError: Error, CustomStringConvertible, Sendable {
    package var description: String

    init(_ description: String) { self.description = description }
}
