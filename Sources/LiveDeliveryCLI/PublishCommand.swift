import ArgumentParser
import Foundation
import LiveDelivery
import LiveDeliveryCore
import LiveDeliveryJSON
import LiveDeliveryTime
import Logging
import RabbitMQ

/// `livedelivery publish`: publishes JSON-lines events to the events exchange, the way an upstream
/// system does (events.md "Transport"): one event per message, persistent, `content_type:
/// application/json`, `message_id` = `event_id`, routing key = `type`, with publisher confirms.
///
/// Publishes are pipelined (up to `--window` unconfirmed at once), so thousands go out per second.
/// Lines are checked lightly (a JSON object with a string `type`); anything else is reported with
/// its file and line number and not published. The worker checks everything else and dead-letters
/// what it refuses, which is why `--shuffle` and `--duplicate-rate` exist: they play the broker's
/// at-least-once, out-of-order delivery on purpose.
struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publishes JSON-lines events to the events exchange with publisher confirms.",
        discussion: """
            Each non-empty line of each FILE is one event (one message). The routing key is the event's \
            `type`, message_id its `event_id`; messages are persistent and published with mandatory set, so \
            an exchange without a bound queue is reported (start `livedelivery run` first: it declares the \
            topology). Exit status 1 when a line was bad or a publish was not confirmed.
            """
    )

    @Argument(help: "JSON-lines files of events ('-' reads standard input).")
    var files: [String]

    @Option(
        help: """
            AMQP URL, or the cluster's nodes as comma-separated URLs (default: $LIVEDELIVERY_AMQP_URLS, \
            else $LIVEDELIVERY_AMQP_URL, else amqp://guest:guest@localhost:5672/%2F).
            """)
    var url: String?

    @Option(help: "The events exchange (default: $LIVEDELIVERY_AMQP_EXCHANGE, else delivery.events).")
    var exchange: String?

    @Flag(help: "Publish in a random order (seeded by --seed).")
    var shuffle = false

    @Option(
        name: .customLong("duplicate-rate"),
        help: "Publish this fraction of the events a second time, at a random later position (0…1).")
    var duplicateRate: Double = 0

    @Option(help: "Seed for --shuffle and --duplicate-rate (default: random; the seed used is printed).")
    var seed: UInt64?

    @Flag(
        name: .customLong("rebase-times"),
        help: "Shift occurred_at and eta times so that the newest occurred_at is now (replays a recorded scenario).")
    var rebaseTimes = false

    @Option(help: "Most messages published but not yet confirmed at once.")
    var window: Int = 1000

    @Option(
        help: """
            Seconds between two messages, each confirmed before the next (a scenario replayed at a pace one can \
            watch, each step its own push); 0 publishes as fast as --window allows.
            """)
    var interval: Double = 0

    @Flag(help: "Only check the files and print what would be published.")
    var dryRun = false

    func validate() throws {
        guard (0...1).contains(duplicateRate) else { throw ValidationError("--duplicate-rate is between 0 and 1") }
        guard window >= 1 else { throw ValidationError("--window is at least 1") }
        guard (0...3600).contains(interval) else { throw ValidationError("--interval is between 0 and 3600 seconds") }
        guard !files.isEmpty else { throw ValidationError("give at least one events file") }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let amqpURL =
            url ?? environment["LIVEDELIVERY_AMQP_URLS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["LIVEDELIVERY_AMQP_URL"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "amqp://guest:guest@localhost:5672/%2F"
        let exchangeName =
            exchange ?? environment["LIVEDELIVERY_AMQP_EXCHANGE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "delivery.events"

        var batch = EventBatch()
        for file in files {
            let text: String
            if file == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw ValidationError("cannot read '\(file)'")
                }
                text = String(decoding: data, as: UTF8.self)
            }
            batch.add(text: text, file: file == "-" ? "<stdin>" : file)
        }
        for bad in batch.bad {
            printError("\(bad.file):\(bad.line): \(bad.reason); not published")
        }
        if rebaseTimes { batch.rebaseTimes(to: Date()) }

        let usedSeed = seed ?? UInt64.random(in: 1...UInt64.max)
        var generator = SplitMix64(seed: usedSeed)
        let messages = batch.arranged(shuffle: shuffle, duplicateRate: duplicateRate, using: &generator)
        let duplicates = messages.count - batch.events.count
        var arrangement = shuffle ? "shuffled" : "in file order"
        if duplicates > 0 { arrangement += ", \(duplicates) duplicates" }
        if shuffle || duplicateRate > 0 { arrangement += ", seed \(usedSeed)" }
        print(
            "read \(batch.events.count) events from \(files.count) file(s)"
                + (batch.bad.isEmpty ? "" : ", \(batch.bad.count) bad line(s) skipped"))
        if dryRun {
            for message in messages { print("\(message.routingKey)\t\(message.eventID ?? "-")") }
            print("dry run: would publish \(messages.count) messages (\(arrangement))")
            if !batch.bad.isEmpty { throw ExitCode.failure }
            return
        }

        let endpoints: AMQPEndpoints
        do {
            endpoints = try AMQPEndpoints(urls: amqpURL)
        } catch {
            throw ValidationError("the AMQP URL is not valid: \(error)")
        }
        var logger = Logger(label: "livedelivery.publish") { label in
            StderrLogHandler(
                label: label,
                format: environment["LIVEDELIVERY_LOG_FORMAT"].flatMap(LogFormat.init(rawValue:)) ?? .logfmt)
        }
        logger.logLevel = .warning
        let started = ContinuousClock.now
        let failures: [String]
        // On a terminal, a progress line on stderr; otherwise only the summary line below.
        let progress = ProgressLine(label: "publish")
        do {
            failures = try await Self.publishAll(
                messages, exchange: exchangeName, window: interval > 0 ? 1 : window,
                interval: .milliseconds(Int64(interval * 1000)), endpoints: endpoints, logger: logger,
                progress: progress)
        } catch {
            progress.finish()
            printError("cannot connect to \(endpoints): \(error)")
            throw AdminExitCode.unreachable
        }
        progress.finish()
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let confirmed = messages.count - failures.count
        let rate = seconds > 0 ? Int(Double(confirmed) / seconds) : confirmed
        print(
            "published \(messages.count) messages to exchange \(exchangeName) (\(arrangement)): "
                + "\(confirmed) confirmed, \(failures.count) failed, \(String(format: "%.2f", seconds)) s, \(rate)/s")
        for (reason, count) in Dictionary(grouping: failures, by: \.self).mapValues(\.count).sorted(by: {
            $0.key < $1.key
        }) {
            printError("\(count) message(s) not confirmed: \(reason)")
        }
        if !failures.isEmpty || !batch.bad.isEmpty { throw ExitCode.failure }
    }

    /// Publishes to the first node that accepts; the messages whose connection was lost before
    /// their confirm go again to the next node (at most once per node, and twice in all for a single
    /// node). Only a confirm counts: a message is never reported published that the broker did not
    /// take, and one published twice is applied once by the worker's inbox. Returns one reason per
    /// message not confirmed; throws when no node accepts a connection.
    private static func publishAll(
        _ messages: [EventMessage], exchange: String, window: Int, interval: Duration, endpoints: AMQPEndpoints,
        logger: Logger, progress: ProgressLine
    ) async throws(RabbitMQError) -> [String] {
        var pending = messages
        var failures: [String] = []
        var node = 0
        let rounds = max(2, endpoints.nodes.count)
        for round in 0..<rounds {
            let (publisher, connected) = try await RabbitMQPublisher.connect(
                to: endpoints, startingAt: node, logger: logger)
            node = connected + 1
            let failed = await publishWindowed(
                pending, exchange: exchange, window: window, interval: interval, publisher: publisher
            ) {
                // Messages lost with the connection go again; only settled ones count as done.
                if $0?.isConnectionLevel != true { progress.advance(total: messages.count) }
            }
            await publisher.close()
            let lost = failed.filter { $0.error.isConnectionLevel }
            failures += failed.filter { !$0.error.isConnectionLevel }.map {
                explain($0.error, exchange: exchange, routingKey: $0.message.routingKey)
            }
            pending = lost.map(\.message)
            if pending.isEmpty { return failures }
            if round < rounds - 1 {
                FileHandle.standardError.write(
                    Data(
                        "livedelivery publish: the connection was lost; publishing \(pending.count) message(s) again\n"
                            .utf8))
            }
        }
        return failures + pending.map { _ in "the connection was lost before the broker confirmed the message" }
    }

    /// Publishes with at most `window` unconfirmed messages, and `interval` between two (after the first's
    /// confirm, with a window of 1); returns the messages that failed, with why.
    private static func publishWindowed(
        _ messages: [EventMessage],
        exchange: String,
        window: Int,
        interval: Duration,
        publisher: RabbitMQPublisher,
        settled: (RabbitMQError?) -> Void
    ) async -> [(message: EventMessage, error: RabbitMQError)] {
        await withTaskGroup(of: (message: EventMessage, error: RabbitMQError)?.self) { group in
            var failures: [(message: EventMessage, error: RabbitMQError)] = []
            var inFlight = 0
            for (index, message) in messages.enumerated() {
                if inFlight >= window, let result = await group.next() {
                    inFlight -= 1
                    settled(result?.error)
                    if let result { failures.append(result) }
                }
                if index > 0 && interval > .zero { try? await Task.sleep(for: interval) }
                group.addTask {
                    do throws(RabbitMQError) {
                        try await publisher.publish(
                            exchange: exchange, routingKey: message.routingKey, body: message.body,
                            properties: RabbitMQMessageProperties(
                                contentType: "application/json",
                                headers: message.orderID.map { [OrderRouting.header: .string($0)] } ?? [:],
                                deliveryMode: .persistent, messageID: message.eventID),
                            mandatory: true)
                        return nil
                    } catch {
                        return (message, error)
                    }
                }
                inFlight += 1
            }
            for await result in group {
                settled(result?.error)
                if let result { failures.append(result) }
            }
            return failures
        }
    }

    private static func explain(_ error: RabbitMQError, exchange: String, routingKey: String) -> String {
        if error.code == .unroutable {
            return "no queue is bound to exchange \(exchange) for routing key \(routingKey) "
                + "(start `livedelivery run` first: it declares the queue)"
        }
        if error.code == .channelClosed, error.replyCode == 404 {
            return "exchange \(exchange) does not exist (start `livedelivery run` first: it declares the topology)"
        }
        return error.description
    }

    private func printError(_ text: String) {
        FileHandle.standardError.write(Data("livedelivery publish: \(text)\n".utf8))
    }
}

/// One message to publish.
private struct EventMessage: Sendable {
    var body: [UInt8]
    var routingKey: String
    var eventID: String?
    /// Sent as the AMQP header `order_id`, which the cells' hash exchange routes by (docs/scaling.md).
    var orderID: String?
}

/// The events read from the files, in file order, and the lines that were refused.
private struct EventBatch {
    struct BadLine {
        var file: String
        var line: Int
        var reason: String
    }

    private(set) var events: [(object: JSONObject, message: EventMessage)] = []
    private(set) var bad: [BadLine] = []

    mutating func add(text: String, file: String) {
        var number = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { continue }
            let bytes = Array(trimmed.utf8)
            guard let value = JSONValue.parse(bytes) else {
                bad.append(BadLine(file: file, line: number, reason: "not valid JSON"))
                continue
            }
            guard case .object(let object) = value else {
                bad.append(BadLine(file: file, line: number, reason: "not a JSON object"))
                continue
            }
            guard case .string(let type)? = object["type"], !type.isEmpty else {
                bad.append(BadLine(file: file, line: number, reason: "no string field `type` (the routing key)"))
                continue
            }
            var eventID: String?
            if case .string(let id)? = object["event_id"] { eventID = id }
            var orderID: String?
            if case .string(let id)? = object["order_id"] { orderID = id }
            // The original bytes are published unchanged unless --rebase-times rewrites them.
            events.append(
                (object, EventMessage(body: bytes, routingKey: type, eventID: eventID, orderID: orderID)))
        }
    }

    /// Shifts `occurred_at`, `eta.earliest` and `eta.latest` of every event by the same amount, so
    /// that the newest `occurred_at` becomes `now`: the events happened just now, relative timing kept.
    mutating func rebaseTimes(to now: Date) {
        let times = events.compactMap { event -> Date? in
            guard case .string(let text)? = event.object["occurred_at"] else { return nil }
            return RFC3339.parse(text)
        }
        guard let newest = times.max() else { return }
        let shift = now.timeIntervalSince(newest).rounded(.down)
        func shifted(_ value: JSONValue?) -> JSONValue? {
            guard case .string(let text)? = value, let date = RFC3339.parse(text) else { return value }
            return .string(RFC3339.format(date.addingTimeInterval(shift)))
        }
        for index in events.indices {
            var object = events[index].object
            object["occurred_at"] = shifted(object["occurred_at"])
            if case .object(var eta)? = object["eta"] {
                eta["earliest"] = shifted(eta["earliest"])
                eta["latest"] = shifted(eta["latest"])
                object["eta"] = .object(eta)
            }
            events[index].object = object
            events[index].message.body = JSONValue.object(object).serialized()
        }
    }

    /// The messages in publishing order: optionally shuffled, with a fraction published twice. A
    /// duplicate goes to a random position after its original (a redelivery comes later).
    func arranged(
        shuffle: Bool,
        duplicateRate: Double,
        using generator: inout some RandomNumberGenerator
    ) -> [EventMessage] {
        var messages = events.map(\.message)
        if shuffle { messages.shuffle(using: &generator) }
        guard duplicateRate > 0 else { return messages }
        var keyed: [(position: Double, message: EventMessage)] = messages.enumerated().map { (Double($0), $1) }
        for (index, message) in messages.enumerated()
        where Double.random(in: 0..<1, using: &generator) < duplicateRate {
            let later = Double.random(in: Double(index) + 0.5...Double(messages.count), using: &generator)
            keyed.append((later, message))
        }
        return keyed.enumerated()
            .sorted { ($0.element.position, $0.offset) < ($1.element.position, $1.offset) }
            .map(\.element.message)
    }
}
