import APNs
import APNsModel
import ArgumentParser
import Foundation
import HTTP2
import LiveDelivery
import LiveDeliveryCore
import LiveDeliveryTime

/// The worker's own work per status update without servers (``HotPath``), counted under valgrind:
/// instructions (`callgrind`) and heap allocations (`dhat`) per event. The counts are the same on every
/// run of the same binary and input, whatever else the machine does, so two revisions compare in
/// separate commands.
///
/// Each tool runs the process twice: both runs build the same orders and the same messages, then
/// apply none or all of the updates; the difference divided by the updates is the cost of one.
/// Synchronous, as the stream it runs (see ``BenchCommand/main()``).
struct EventsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Instructions and heap allocations per status update, server-free, under valgrind.")

    @Option(help: "Orders, each with an app-started activity and a first status already stored.")
    var orders: Int = 500

    @Option(help: "Status updates, round robin over the orders (each with a new step or ETA, so a push).")
    var updates: Int = 1000

    @Option(help: "Events per consumer batch (and answers per recording).")
    var batch: Int = 100

    @Option(help: "The folder holding policy.json and content-mapping.json.")
    var configDir: String = "Config"

    @Option(help: "Keep callgrind's profile of the full run in this file (for callgrind_annotate).")
    var profile: String?

    @Option(help: "Exit 1 when an update costs more instructions than this (a regression guard).")
    var maxInstructions: Int?

    @Option(help: "Exit 1 when an update makes more heap allocations than this (a regression guard).")
    var maxAllocations: Int?

    func run() throws {
        // valgrind 3.19 cannot read the DWARF 5 that Swift writes: it runs a copy without it (the symbol
        // table stays, so a profile still names the functions).
        let executable = FileManager.default.temporaryDirectory.appendingPathComponent("livedelivery-bench-\(getpid())")
        try FileManager.default.copyItem(
            at: URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath(), to: executable)
        defer { try? FileManager.default.removeItem(at: executable) }
        try Self.execute("/usr/bin/strip", ["--strip-debug", executable.path])
        let base = [
            executable.path, "event-stream", "--orders", "\(orders)", "--updates", "\(updates)", "--batch", "\(batch)",
            "--config-dir", configDir,
        ]
        print("events: \(updates) status updates over \(orders) orders, batches of \(batch) (server-free, valgrind)")
        let tools: [(name: String, arguments: [String], unit: String)] = [
            ("callgrind", ["--tool=callgrind", "--callgrind-out-file=/dev/null"], "instructions"),
            ("dhat", ["--tool=dhat", "--dhat-out-file=/dev/null"], "allocations"),
        ]
        var exceeded: [String] = []
        for tool in tools {
            var counts: [Double] = []
            for applied in [0, updates] {
                var arguments = tool.arguments
                if tool.name == "callgrind", applied == updates, let profile {
                    arguments = ["--tool=callgrind", "--callgrind-out-file=\(profile)"]
                }
                let log = try valgrind(arguments + base + ["--apply", "\(applied)"])
                counts.append(try Self.count(tool.name, in: log))
            }
            let perEvent = (counts[1] - counts[0]) / Double(updates)
            print("  \(tool.unit) per update: \(String(format: "%.0f", perEvent))")
            if let limit = tool.name == "callgrind" ? maxInstructions : maxAllocations,
                perEvent.rounded() > Double(limit)
            {
                exceeded.append("\(tool.unit) per update \(String(format: "%.0f", perEvent)), above \(limit)")
            }
        }
        guard exceeded.isEmpty else {
            print("events: " + exceeded.joined(separator: "; "))
            throw ExitCode.failure
        }
    }

    /// Runs valgrind and returns its log.
    private func valgrind(_ arguments: [String]) throws -> String {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("events-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        try Self.execute("/usr/bin/valgrind", ["--log-file=\(log.path)"] + arguments)
        return try String(contentsOf: log, encoding: .utf8)
    }

    private static func execute(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        // The same count on every run: hashing seeded per process would reorder Set and Dictionary walks.
        process.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_DETERMINISTIC_HASHING": "1"]) {
            $1
        }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError(
                "\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
    }

    /// callgrind's `Collected : N` or dhat's `Total: … in N blocks`.
    static func count(_ tool: String, in log: String) throws -> Double {
        for line in log.split(separator: "\n") {
            let words = line.split(separator: " ")
            if tool == "callgrind", let index = words.firstIndex(of: "Collected"), index + 2 < words.count {
                return Double(words[index + 2].filter(\.isNumber)) ?? 0
            }
            if tool == "dhat", words.contains("Total:"), let index = words.firstIndex(of: "blocks"), index > 0 {
                return Double(words[index - 1].filter(\.isNumber)) ?? 0
            }
        }
        throw ValidationError("no count in the \(tool) log")
    }
}

/// ``EventsBenchmark``'s stream, in the process valgrind runs: builds the orders and every update's
/// message, then applies the first `apply` updates. Synchronous: valgrind cannot run Swift's concurrency
/// threads (see ``BenchCommand/main()``).
struct EventStream: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "event-stream",
        abstract: "The stream `events` counts: applies the first N updates and prints the time per update.",
        shouldDisplay: false)

    @Option var orders: Int = 500
    @Option var updates: Int = 1000
    @Option var batch: Int = 100
    @Option var configDir: String = "Config"
    @Option(help: "Updates to apply.") var apply: Int = 1000

    func run() throws {
        let applying = min(apply, updates)
        let directory = URL(fileURLWithPath: configDir)
        let tracking = try DefaultConfiguration.load(
            policyJSON: Array(
                try Data(contentsOf: directory.appendingPathComponent(DefaultConfiguration.policyFileName))),
            mappingJSON: Array(
                try Data(contentsOf: directory.appendingPathComponent(DefaultConfiguration.mappingFileName))))
        let hotPath = HotPath(tracking: tracking)
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        var stored: [String: HotPath.StoredOrder] = [:]
        for order in 0..<orders {
            stored["o\(order)"] = try hotPath.document(
                orderID: "o\(order)",
                after: [
                    StreamMessages.token(order: order, at: start),
                    StreamMessages.status(order: order, sequence: 1, at: start),
                ],
                now: start)
        }
        let messages = (0..<updates).map { index in
            StreamMessages.status(
                order: index % orders, sequence: 2 + index / orders,
                at: start.addingTimeInterval(60 + Double(index) / 100))
        }
        let authorization = "bearer " + String(repeating: "j", count: 180)
        let devicePath = "https://api.push.apple.com/3/device/"
        let send = { @Sendable (push: PlannedPush) -> APNsOutcome in
            guard let request = APNsPushSender.request(push), case .device(let token) = request.kind else {
                return .payloadFault(reason: .missingDeviceToken, status: 400)
            }
            let http2 = APNsClient.http2Request(
                request, url: devicePath + token, authorization: authorization, timeout: .seconds(15))
            let apnsID = http2.headers.first { $0.name == "apns-id" }.flatMap { UUIDText.parse($0.value) } ?? UUID()
            return APNsOutcome.classify(status: 200, body: [], apnsID: apnsID, retryAfter: nil, delays: .init())
        }
        let clock = ContinuousClock()
        var parameters = 0
        let elapsed = try clock.measure {
            var index = 0
            while index < applying {
                let batch = Array(messages[index..<min(index + self.batch, applying)])
                let now = start.addingTimeInterval(61 + Double(index) / 100)
                parameters += try hotPath.apply(batch, to: &stored, now: now, send: send)
                index += batch.count
            }
        }
        if applying > 0 {
            let microseconds = elapsed.seconds * 1e6 / Double(applying)
            print(
                "\(applying) updates: \(String(format: "%.1f", microseconds)) µs per update (timed, not counted), "
                    + "\(parameters) statement parameters built")
        }
    }
}

/// The stream's messages, as upstream publishes them (docs/events.md): fixed text, no randomness.
private enum StreamMessages {
    static func token(order: Int, at date: Date) -> InboundMessage {
        let body = """
            {"type":"activity.token","version":1,"event_id":"o\(order)-tok","occurred_at":"\(RFC3339.format(date, fractional: true))",\
            "order_id":"o\(order)","activity_id":"act-\(order)","device_id":"dev-\(order)",\
            "token":"\(String(repeating: String(format: "%02x", order % 256), count: 32))",\
            "bundle_id":"com.example.pizza","environment":"production"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.token", messageID: "o\(order)-tok")
    }

    static func status(order: Int, sequence: Int, at date: Date) -> InboundMessage {
        let status = sequence == 1 ? "confirmed" : sequence.isMultiple(of: 2) ? "preparing" : "picked_up"
        let eta = date.addingTimeInterval(Double(1200 + sequence * 60))
        let body = """
            {"courier":{"name":"Courier \(order % 13)"},"eta":{"earliest":"\(RFC3339.format(eta, fractional: true))",\
            "latest":"\(RFC3339.format(eta.addingTimeInterval(600), fractional: true))"},\
            "event_id":"o\(order)-s\(sequence)","merchant":{"name":"Merchant \(order % 97)"},\
            "occurred_at":"\(RFC3339.format(date, fractional: true))","order_id":"o\(order)","order_number":\(order),\
            "sequence":\(sequence),"status":"\(status)","type":"order.status","user_id":"u\(order)","version":1}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "order.status", messageID: "o\(order)-s\(sequence)")
    }
}
