import Crypto
import Foundation
import LiveDelivery
import LiveDeliveryCore
import Postgres
import RabbitMQ
import TestSupport
import Testing

/// What a publisher controls stays bounded and never fails a batch: refusals on first sight with a
/// specific reason, dead letters kept in part, texts the database cannot store made storable.
@Suite("Hostile input", .timeLimit(.minutes(6)))
struct HostileInputTests {
    @Test("an app not in the apps file is refused on arrival (unknown_app), and the rest of the batch is applied")
    func unknownApp() async throws {
        try await withWorker { harness, worker in
            let order = TestEnvironment.uniqueName("O")
            let outcome = try await worker.processor.process([
                Events.status(order, "confirmed", sequence: 1),
                Events.activityToken(order, activity: "a-1", token: Events.token(), bundleID: "com.example.madeup"),
                // The configured app, in the other environment.
                Events.activityToken(order, activity: "a-2", token: Events.token(), environment: "sandbox"),
                Events.activityToken(order, activity: "a-3", token: Events.token()),
            ])
            #expect(outcome.applied == 2 && outcome.rejected == 2)
            let rows = try await harness.database.client.query(
                "SELECT reason, field, message FROM dead_letters ORDER BY id")
            let refused = try rows.map {
                (
                    try $0.decode(String.self, "reason"), try $0.decode(String?.self, "field"),
                    try $0.decode(String.self, "message")
                )
            }
            #expect(refused.map(\.0) == ["unknown_app", "unknown_app"])
            #expect(refused.map(\.1) == ["bundle_id", "bundle_id"])
            #expect(refused[0].2.contains("com.example.madeup (production)"))
            #expect(try await harness.database.count("SELECT count(*) FROM activities") == 1)
        }
    }

    @Test("a user's push-to-start devices and an order's activities are capped; the known ones still rotate")
    func devicesAndActivitiesAreCapped() async throws {
        try await withWorker { harness, worker in
            let user = TestEnvironment.uniqueName("u")
            let devices = OrderState.maxPushToStartDevices + 3
            let outcome = try await worker.processor.process(
                (0..<devices).map { Events.pushToStart(user: user, device: "d\($0)", token: Events.token()) })
            #expect(outcome.applied == devices, "each event is applied: the cap is a decision, not a refusal")
            let onFile = try await harness.database.strings(
                "SELECT device_id FROM push_to_start_tokens WHERE user_id = \(user) ORDER BY device_id")
            #expect(onFile.count == OrderState.maxPushToStartDevices, "\(onFile)")
            // A device on file gets its newer token all the same.
            let rotated = Events.token()
            _ = try await worker.processor.process([
                Events.pushToStart(user: user, device: "d0", token: rotated, at: "2026-11-21T10:05:00Z")
            ])
            #expect(
                try await harness.database.strings(
                    "SELECT registration ->> 'token' FROM push_to_start_tokens WHERE user_id = \(user) AND device_id = 'd0'"
                ) == [rotated])

            let order = TestEnvironment.uniqueName("O")
            _ = try await worker.processor.process(
                [Events.status(order, "confirmed", sequence: 1)]
                    + (0..<(OrderState.maxActivities + 5)).map {
                        Events.activityToken(order, activity: "a-\($0)", token: Events.token())
                    })
            #expect(
                try await harness.database.count("SELECT count(*) FROM activities WHERE order_id = \(order)")
                    == OrderState.maxActivities)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM timeline_decisions WHERE order_id = \(order) AND code = 'activity_limit'")
                    == 5)
        }
    }

    @Test("a body past the limit keeps its first 8 KiB, its length and the hash of all of it; it is sent once")
    func largeBodyKeptInPart() async throws {
        try await withWorker { harness, worker in
            let body = Array(repeating: UInt8(ascii: "x"), count: 100_000)
            let outcome = try await worker.processor.process([
                InboundMessage(body: body, routingKey: "order.status", messageID: "big-1")
            ])
            #expect(outcome.rejected == 1)
            let row = try #require(
                try await harness.database.client.query(
                    "SELECT reason, octet_length(body) AS kept, body_length, body_sha256 FROM dead_letters"
                ).first)
            #expect(try row.decode(String.self, "reason") == "body_too_large")
            #expect(try row.decode(Int.self, "kept") == 8192)
            #expect(try row.decode(Int.self, "body_length") == 100_000)
            #expect(try row.decode([UInt8].self, "body_sha256") == Array(SHA256.hash(data: body)))
            // The same body again is the same dead letter.
            #expect(
                try await worker.processor.process([
                    InboundMessage(body: body, routingKey: "order.status", messageID: "big-1")
                ]).rejected == 1)
            #expect(try await harness.database.count("SELECT count(*) FROM dead_letters") == 1)
        }
    }

    @Test("U+0000 in a field, a routing key or a message id is refused or stored replaced: the batch commits")
    func nulNeverFailsABatch() async throws {
        try await withWorker { harness, worker in
            let order = TestEnvironment.uniqueName("O")
            let good = Events.status(order, "confirmed", sequence: 1)
            var nulInField = Events.status(order + "-n", "confirmed", sequence: 1)
            nulInField.body = Array(
                String(decoding: nulInField.body, as: UTF8.self)
                    .replacingOccurrences(of: "Pizza Place", with: "Pizza\\u0000Place").utf8)
            let nulInRoutingKey = InboundMessage(
                body: Array("{}".utf8), routingKey: "order.status\u{0000}x", messageID: "m\u{0000}1")
            let outcome = try await worker.processor.process([good, nulInField, nulInRoutingKey])
            #expect(outcome.applied == 1 && outcome.rejected == 2)
            let rows = try await harness.database.client.query(
                "SELECT reason, field, routing_key, event_id FROM dead_letters ORDER BY id")
            let refused = try rows.map {
                (
                    try $0.decode(String.self, "reason"), try $0.decode(String?.self, "field"),
                    try $0.decode(String.self, "routing_key"), try $0.decode(String?.self, "event_id")
                )
            }
            #expect(refused.count == 2)
            #expect(refused[0].0 == "invalid_field" && refused[0].1 == "merchant.name")
            #expect(refused[1].2 == "order.status\u{FFFD}x" && refused[1].3 == "m\u{FFFD}1")
        }
    }

    @Test("a batch of followers' events naming more users than one transaction locks is applied in parts")
    func followersLocksBounded() async throws {
        try await withWorker { harness, worker in
            // Each transaction that locks orders records the advisory locks it holds at that point (after the
            // users' locks), read from pg_locks in that transaction.
            // (The owner's fixture: the worker's login may not create tables or triggers.)
            try await harness.database.owner.query("CREATE TABLE observed_locks (tx bigint, locks bigint)")
            try await harness.database.owner.query(
                """
                CREATE FUNCTION observe_locks() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
                BEGIN
                    INSERT INTO observed_locks SELECT txid_current(), count(*) FROM pg_locks
                    WHERE locktype = 'advisory' AND pid = pg_backend_pid();
                    RETURN NULL;
                END $$
                """)
            try await harness.database.owner.query(
                "CREATE TRIGGER observe_locks AFTER INSERT ON orders FOR EACH STATEMENT EXECUTE FUNCTION observe_locks()"
            )
            let bound = EventProcessor.maxLockedUsers
            let perEvent = OrderState.maxFollowers
            // Exactly the bound in the first part, then in the second, then 20 events more.
            let events = 2 * bound / perEvent + 20
            let prefix = TestEnvironment.uniqueName("f")
            let messages = (0..<events).map { n in
                let id = "\(prefix)-e\(n)"
                let followers = (0..<perEvent).map { "\"\(prefix)-u\(n * perEvent + $0)\"" }
                let body = """
                    {"type":"order.followers","version":1,"event_id":"\(id)","occurred_at":"2026-11-21T10:04:05Z",\
                    "order_id":"\(prefix)-O\(n)","sequence":1,"followers":[\(followers.joined(separator: ","))]}
                    """
                return InboundMessage(body: Array(body.utf8), routingKey: "order.followers", messageID: id)
            }
            let outcome = try await worker.processor.process(messages)
            #expect(outcome.applied == events && outcome.rejected == 0)
            #expect(outcome.transactions == 3)
            #expect(
                try await harness.database.count("SELECT count(*) FROM inbox WHERE event_id LIKE \(prefix + "-e%")")
                    == events)
            let locks = try await harness.database.owner.query(
                "SELECT tx, max(locks) AS locks FROM observed_locks GROUP BY tx ORDER BY min(locks) DESC")
            let held = try locks.map { try $0.decode(Int.self, "locks") }
            #expect(held == [bound, bound, 20 * perEvent], "advisory locks per transaction")
        }
    }

    @Test("a dead letter's x-death routing key past 255 bytes is kept in part, cut on a UTF-8 boundary; recorded once")
    func longDeathRoutingKeyKeptInPart() async throws {
        try await withWorker { harness, worker in
            try await whileRunning(worker) {
                try await eventually("the worker is ready") { worker.health.snapshot.ready }
                let publisher = try await RabbitMQPublisher.connect(
                    try AMQPConfiguration(url: TestEnvironment.amqpURL), logger: quietLogger)
                // As a publisher may write it straight to the dead-letter exchange: 20 kB of routing key that
                // does not compress (an index row holds about 2.7 kB), with a two-byte character across the
                // 252nd byte.
                let routingKey =
                    String(repeating: "k", count: 251) + "é" + (0..<600).map { _ in UUID().uuidString }.joined()
                var properties = RabbitMQMessageProperties()
                properties.messageID = "long-death-1"
                properties.headers = [
                    "x-first-death-exchange": .string(harness.configuration.amqp.exchange),
                    "x-first-death-reason": .string("delivery_limit"),
                    "x-death": .array([.table(["routing-keys": .array([.string(routingKey)])])]),
                ]
                try await publisher.publish(
                    exchange: harness.configuration.amqp.deadLetterExchange, routingKey: "",
                    body: Array("{}".utf8), properties: properties)
                await publisher.close()
                try await eventually("the dead letter is recorded") {
                    try await harness.database.count("SELECT count(*) FROM dead_letters") == 1
                }
                let kept = try await harness.database.strings("SELECT routing_key FROM dead_letters")
                #expect(kept == [String(repeating: "k", count: 251) + DeadLetterRows.cutMarker])
                #expect(kept.allSatisfy { $0.utf8.count <= DeadLetterRows.textPrefix })
            }
            try await deleteTopology(harness.configuration.amqp)
        }
    }
}
