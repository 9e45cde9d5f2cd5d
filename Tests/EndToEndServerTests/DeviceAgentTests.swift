import APNsSimulator
import DeviceAgent
import Foundation
import LiveDeliveryJSON
import Logging
import RabbitMQ
import Synchronization
import TestSupport
import Testing
import WorkerHarness

/// apns-sim's device agent (`--agent-knows`) against a real worker and broker: the simulated app reports what
/// a push-to-start gave it, and the worker drives the activity through the reported token from then on.
@Suite(.timeLimit(.minutes(4)))
struct DeviceAgentTests {
    typealias Message = (routingKey: String, body: [UInt8], messageID: String?)

    /// What the agent made of each start, in order.
    final class Outcomes: Sendable {
        let list = Mutex<[DeviceAgent.Outcome]>([])
    }

    static func message(_ object: [String: Any]) -> Message {
        let body = Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        return (object["type"] as! String, body, object["event_id"] as? String)
    }

    /// One user's push-to-start token and order, numbered `number`.
    struct Person {
        let user: String
        let order: String
        let number: Int
        let startToken = Events.token()

        func registration() -> Message {
            DeviceAgentTests.message([
                "type": "activity.push_to_start_token", "version": 1, "event_id": "\(order)-p2s",
                "occurred_at": Self.time(0), "user_id": user, "device_id": "phone-\(user)", "token": startToken,
                "bundle_id": Scenario.bundleID, "environment": "production", "attributes_type": "DeliveryAttributes",
            ])
        }

        func status(_ status: String, sequence: Int) -> Message {
            DeviceAgentTests.message([
                "type": "order.status", "version": 1, "event_id": "\(order)-s\(sequence)",
                "occurred_at": Self.time(sequence), "order_id": order, "user_id": user, "sequence": sequence,
                "status": status, "order_number": number, "merchant": ["name": "Noodle Bar"],
            ])
        }

        static func time(_ minute: Int) -> String {
            ISO8601DateFormatter().string(from: Date().addingTimeInterval(Double(minute * 60 - 3600)))
        }
    }

    @Test(
        "a remote start's update token is reported by the agent, and the worker updates and ends the activity through it; an order the app does not know is not reported"
    )
    func agentReportsRemoteStarts() async throws {
        let (starts, startsContinuation) = AsyncStream.makeStream(of: PushRecord.self)
        try await Fixture.with("device-agent", simulator: { $0.onActivityStarted = { startsContinuation.yield($0) } }) {
            fixture in
            let known = Person(user: "u-known", order: "\(fixture.name)-known", number: 71_001)
            let unknown = Person(user: "u-unknown", order: "\(fixture.name)-unknown", number: 71_002)

            // The app knows both phones' push-to-start tokens, and only the first order.
            let knowledgeFile = fixture.directory.appendingPathComponent("app-knows.jsonl")
            let lines = [known.registration(), unknown.registration(), known.status("placed", sequence: 1)]
            try Data(lines.map { String(decoding: $0.body, as: UTF8.self) }.joined(separator: "\n").utf8)
                .write(to: knowledgeFile)
            let agent = DeviceAgent(
                knowledge: try DeviceAgent.Knowledge(files: [knowledgeFile]),
                endpoints: try AMQPEndpoints(urls: [fixture.amqpURL]), exchange: fixture.exchange,
                logger: Logger(label: "device-agent"))
            let outcomes = Outcomes()
            let agentTask = Task {
                await agent.run(starts) { outcome in outcomes.list.withLock { $0.append(outcome) } }
            }

            try await fixture.startWorker("w1")
            try await fixture.publish(
                [known.registration(), unknown.registration()]
                    + [known, unknown].flatMap {
                        [$0.status("placed", sequence: 1), $0.status("confirmed", sequence: 2)]
                    })
            let reported = try await eventuallyValue("both starts handled by the agent", timeout: .seconds(60)) {
                outcomes.list.withLock { $0.count >= 2 ? $0 : nil }
            }
            #expect(reported.contains(.unknownOrder(71_002)), "\(reported)")
            let start = try #require(
                fixture.pushes(token: known.startToken).first { $0.status == 200 && $0.verdict.kind == .started })
            let activityID = try #require(start.activityID)
            let updateToken = try #require(start.issuedUpdateToken)
            #expect(reported.contains(.reported(eventID: "app-token-\(activityID)")), "\(reported)")
            try await fixture.waitUntilSettled(eventIDs: ["app-token-\(activityID)"])

            // From the reported token on, the worker updates the activity and ends it through that token.
            try await fixture.publish([known.status("preparing", sequence: 3)])
            let update = try await eventuallyValue("an update through the reported token", timeout: .seconds(60)) {
                fixture.pushes(token: updateToken).first { $0.deviceToken == updateToken && $0.status == 200 }
            }
            #expect(update.verdict.kind == .displayed, "\(update.verdict)")
            try await fixture.publish([
                known.status("out_for_delivery", sequence: 4), known.status("delivered", sequence: 5),
            ])
            let ended = try await eventuallyValue("the known order's activity ended", timeout: .seconds(60)) {
                fixture.simulator.activity(id: activityID).flatMap { $0.ended ? $0 : nil }
            }
            if case .string(let step)? = ended.contentState?["currentStep"] {
                #expect(step == "delivered")
            } else {
                Issue.record("no currentStep shown: \(String(describing: ended.contentState))")
            }
            #expect(
                fixture.pushes(token: updateToken).contains {
                    $0.deviceToken == updateToken && $0.verdict.kind == .ended
                },
                "the end did not go to the reported token")
            #expect(
                try await fixture.count("SELECT count(*) FROM inbox WHERE event_id LIKE 'app-token-%'") == 1,
                "one report, for the order the app knows")

            startsContinuation.finish()
            await agentTask.value
        }
    }
}
