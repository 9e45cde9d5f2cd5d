import APNsModel
import ArgumentParser
import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON
import LiveDeliveryTime

/// `livedelivery render`: runs order events through the core, exactly as the worker would, and
/// prints each push it would send with the reason for every decision. Every push is taken as
/// accepted by APNs. For tuning Config/policy.json and Config/content-mapping.json.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Runs order events (JSON lines) through the policy and prints the pushes it would send.",
        discussion: """
            Each line of the events file is one message body as published to RabbitMQ. The clock is each \
            event's occurred_at (never moving backwards), or --now. Pushes are assumed accepted by APNs.
            """
    )

    @Option(name: .long, help: "The events, one JSON object per line (.jsonl).")
    var events: String

    @Option(name: .long, help: "A fixed clock (RFC 3339) instead of each event's occurred_at.")
    var now: String?

    @Option(name: .long, help: "The folder holding policy.json and content-mapping.json.")
    var configDir: String = DefaultConfiguration.directoryName

    @Option(name: .long, help: "After the events, run the sweeper at this time (RFC 3339).")
    var sweepAt: String?

    func run() async throws {
        let fixedNow = try now.map { try Self.parseDate($0, option: "--now") }
        let sweepTime = try sweepAt.map { try Self.parseDate($0, option: "--sweep-at") }
        let configuration = try loadConfiguration()
        guard let text = try? String(contentsOfFile: events, encoding: .utf8) else {
            throw ValidationError("cannot read the events file '\(events)'")
        }
        var renderer = Renderer(tracker: OrderTracker(configuration: configuration))
        var clock = fixedNow ?? .distantPast
        var number = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { continue }
            number += 1
            let result = EventDecoder.decode(Array(trimmed.utf8))
            if fixedNow == nil, case .success(let event) = result {
                clock = max(clock, event.occurredAt)
            }
            renderer.handle(result, number: number, now: clock)
        }
        if let sweepTime {
            renderer.sweepAll(now: sweepTime)
        }
        renderer.printSummary()
    }

    private func loadConfiguration() throws -> TrackingConfiguration {
        let directory = URL(fileURLWithPath: configDir, isDirectory: true)
        let policyURL = directory.appendingPathComponent(DefaultConfiguration.policyFileName)
        let mappingURL = directory.appendingPathComponent(DefaultConfiguration.mappingFileName)
        guard let mapping = try? Data(contentsOf: mappingURL) else {
            throw ValidationError("cannot read \(mappingURL.path) (set --config-dir)")
        }
        let policy = try? Data(contentsOf: policyURL)
        do {
            return try DefaultConfiguration.load(policyJSON: policy.map { Array($0) }, mappingJSON: Array(mapping))
        } catch {
            throw ValidationError(error.description)
        }
    }

    private static func parseDate(_ text: String, option: String) throws -> Date {
        guard let date = RFC3339.parse(text) else {
            throw ValidationError("\(option) must be an RFC 3339 timestamp like 2026-11-21T10:04:05Z")
        }
        return date
    }
}

/// Holds what the worker would store (orders, users' push-to-start tokens) and prints each step.
private struct Renderer {
    let tracker: OrderTracker
    var orders: [String: OrderState] = [:]
    var orderOrder: [String] = []
    /// The users' push-to-start tokens and device settings, as the worker files them.
    var reports = UserReports()
    var pushCount = 0
    var rejectionCount = 0
    /// When the last answer of the event being run came (a push is sent at its `notBefore` at the earliest).
    var lastAnswerAt = Date.distantPast

    init(tracker: OrderTracker) { self.tracker = tracker }

    mutating func handle(_ result: Result<InboundEvent, EventRejection>, number: Int, now: Date) {
        switch result {
        case .failure(let rejection):
            rejectionCount += 1
            print("── #\(number)  REJECTED  (clock \(RFC3339.format(now)))")
            print(
                "   dead-lettered: \(rejection.reason)" + (rejection.field.map { " [\($0)]" } ?? "")
                    + " — \(rejection.message)")
            print()
        case .success(let event):
            print(
                "── #\(number)  \(event.type)  \(event.eventID)  occurred \(RFC3339.format(event.occurredAt))  (clock \(RFC3339.format(now)))"
            )
            let filed = reports.file(event)
            let orderIDs = event.orders(openOrdersOfUser: openOrders(of:))
            switch event {
            case .pushToStartToken(let e) where orderIDs.isEmpty:
                print(
                    "   user \(e.userID): push-to-start token \(e.token) on file for device \(e.deviceID); no open order yet"
                )
            case .activitySettings(let e) where !filed:
                print("   user \(e.userID): an older settings report for device \(e.deviceID); the newer one stands")
            case .activitySettings(let e) where orderIDs.isEmpty:
                print(
                    "   user \(e.userID): device \(e.deviceID) has Live Activities \(e.activitiesEnabled ? "on" : "off"), frequent updates \(e.frequentPushesEnabled ? "on" : "off"); no open order"
                )
            default:
                break
            }
            for orderID in orderIDs { run(event, orderID: orderID, now: now) }
            print()
        }
    }

    /// The user's open orders: their own and those they follow.
    func openOrders(of userID: String) -> [String] {
        orderOrder.filter { orderID in
            guard let state = orders[orderID], !state.isSettled else { return false }
            return state.record?.userID == userID || state.followers.contains(userID)
        }
    }

    /// What the worker would read for the order: its user's and followers' tokens and settings, and the
    /// channels open per app (every order's channel that is not closed).
    func context(_ state: OrderState, userID: String?, event: InboundEvent? = nil) -> TrackingContext {
        var joining: [String] = []
        if case .orderFollowers(let e)? = event { joining = e.followers }
        var openChannels: [String: Int] = [:]
        for order in orders.values {
            if let channel = order.channel, let app = channel.broadcast?.app, !channel.phase.isFinal {
                openChannels[app, default: 0] += 1
            }
        }
        return TrackingContext(
            order: state, userID: userID, joining: joining, tokens: reports.tokens, settings: reports.settings,
            openChannels: openChannels)
    }

    mutating func run(_ event: InboundEvent, orderID: String, now: Date) {
        let state = orders[orderID] ?? OrderState(orderID: orderID, now: now)
        if orders[orderID] == nil { orderOrder.append(orderID) }
        let userID = state.record?.userID ?? event.userID
        lastAnswerAt = .distantPast
        let step = tracker.apply(event, to: state, context: context(state, userID: userID, event: event), now: now)
        orders[orderID] = show(step, orderID: orderID, now: now)
        sweepIfAsked(orderID)
    }

    /// As the worker's sweeper: an answer that asks for it (a channel created or refused, whose followers'
    /// devices start then) gets it at once.
    mutating func sweepIfAsked(_ orderID: String) {
        guard let state = orders[orderID], let due = state.nextSweepAt, due <= lastAnswerAt else { return }
        print("   ⟳ the sweeper, asked for by that answer:")
        let step = tracker.sweep(state, context: context(state, userID: state.record?.userID), now: lastAnswerAt)
        orders[orderID] = show(step, orderID: orderID, now: lastAnswerAt)
    }

    mutating func sweepAll(now: Date) {
        print("── sweep at \(RFC3339.format(now))")
        for orderID in orderOrder {
            guard let state = orders[orderID] else { continue }
            let step = tracker.sweep(state, context: context(state, userID: state.record?.userID), now: now)
            if step.decisions.isEmpty && step.pushes.isEmpty {
                print("   order \(orderID): nothing to do")
            }
            orders[orderID] = show(step, orderID: orderID, now: now)
        }
        print()
    }

    /// Prints a step, then records every push as accepted (as APNs would answer; a channel's creation
    /// answers a made-up channel id), the pushes that acceptance plans too, and returns the state after that.
    mutating func show(_ step: Step, orderID: String, now: Date) -> OrderState {
        for decision in step.decisions { print("   · \(decision)") }
        for key in step.withdrawn { print("   ✕ withdrawn: the pending push of \(key) must not be sent") }
        var state = step.state
        var queue = step.pushes
        while !queue.isEmpty {
            let push = queue.removeFirst()
            pushCount += 1
            printPush(push, now: now)
            let sentAt = max(now, push.notBefore)
            lastAnswerAt = sentAt
            let answer: PushOutcome =
                push.kind == .openChannel ? .channelCreated(channelID: Self.channelID(push)) : .accepted
            let status = push.kind == .openChannel ? "201" : push.kind == .closeChannel ? "204" : "200"
            let outcome = tracker.record(answer, for: push, in: state, now: sentAt)
            for (index, decision) in outcome.decisions.enumerated() {
                print("   · \(decision)" + (index == 0 ? "  [APNs \(status), simulated]" : ""))
            }
            for key in outcome.withdrawn { print("   ✕ withdrawn: the pending push of \(key) must not be sent") }
            queue.removeAll { pending in outcome.pushes.contains { $0.activityKey == pending.activityKey } }
            queue += outcome.pushes
            state = outcome.state
        }
        return state
    }

    /// A channel id as APNs makes them (16 bytes, base64), from the request's id so that renders repeat.
    static func channelID(_ push: PlannedPush) -> String {
        var bytes: [UInt8] = []
        var hex = push.apnsID.filter { $0 != "-" }.makeIterator()
        while let high = hex.next(), let low = hex.next(), let byte = UInt8(String([high, low]), radix: 16) {
            bytes.append(byte)
        }
        return Data(bytes).base64EncodedString()
    }

    func printPush(_ push: PlannedPush, now: Date) {
        print(
            "   ▶ PUSH \(push.kind.rawValue.uppercased())  order \(push.orderID)  activity \(push.activityKey)  — \(push.reason)"
        )
        if push.notBefore > now {
            print("     (held until \(RFC3339.format(push.notBefore)) so that aps.timestamp strictly increases)")
        }
        print("     \(push.method) \(push.redactedPath)  (\(push.host), \(push.payload.count) bytes)")
        for header in push.headers { print("     \(header.name): \(header.value)") }
        if let value = JSONValue.parse(push.payload) {
            for line in JSONValue.prettyPrinted(push.payload).split(separator: "\n") { print("     \(line)") }
            print("     " + annotate(value))
        }
    }

    /// The dates of a payload in words: APNs fields are Unix seconds, Swift `Date`s seconds since 2001.
    func annotate(_ payload: JSONValue) -> String {
        var notes: [String] = []
        guard let aps = payload["aps"] else { return "" }
        for key in ["timestamp", "stale-date", "dismissal-date"] {
            if case .int(let seconds)? = aps[key] {
                notes.append("\(key) \(RFC3339.format(Date(timeIntervalSince1970: Double(seconds))))")
            }
        }
        for field in tracker.configuration.mapping.contentState where field.type == .date || field.type == .dateRange {
            func date(_ value: JSONValue) -> String? {
                let seconds: Double
                switch value {
                case .int(let i): seconds = Double(i)
                case .double(let d): seconds = d
                default: return nil
                }
                return RFC3339.format(
                    field.dateEncoding == .referenceDate
                        ? Date(timeIntervalSinceReferenceDate: seconds) : Date(timeIntervalSince1970: seconds))
            }
            switch aps["content-state"]?[field.name] {
            case .array(let pair)? where pair.count == 2:
                if let a = date(pair[0]), let b = date(pair[1]) { notes.append("\(field.name) \(a) … \(b)") }
            case let value?:
                if let a = date(value) { notes.append("\(field.name) \(a)") }
            case nil:
                break
            }
        }
        return "dates: " + notes.joined(separator: ", ")
    }

    func printSummary() {
        print("══ \(pushCount) push(es), \(rejectionCount) rejected event(s)")
        for orderID in orderOrder {
            guard let state = orders[orderID] else { continue }
            print(
                "   order \(orderID): \(state.status?.rawValue ?? "no status yet")"
                    + (state.isSettled ? " (settled)" : ""))
            for activity in state.activities {
                print(
                    "     \(activity.key): \(activity.phase)" + (activity.closeReason.map { " (\($0))" } ?? "")
                        + ", alerts for \(activity.alertedSteps.joined(separator: ", "))")
            }
            if let channel = state.channel {
                print(
                    "     channel \(channel.channelID ?? "(none)"): \(channel.phase)"
                        + (channel.closeReason.map { " (\($0))" } ?? "")
                        + ", followers \(state.followers.joined(separator: ", "))")
            }
            if let next = state.nextSweepAt { print("     next sweep at \(RFC3339.format(next))") }
        }
    }
}
