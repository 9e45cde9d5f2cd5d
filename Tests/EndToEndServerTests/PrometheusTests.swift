import APNsSimulator
import ChildProcesses
import Foundation
import LiveDeliveryJSON
import TestSupport
import Testing
import WorkerHarness

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The alert rules and the dashboard in `ops/` against a real Prometheus (Debian's package) scraping
/// two real workers under load: every rule evaluates, and every recording rule and every panel
/// expression returns data.
@Suite(.timeLimit(.minutes(6)))
struct PrometheusTests {
    static let rules = TestEnvironment.projectRoot.appendingPathComponent("ops/prometheus/livedelivery.rules.yml")
    static let dashboard = TestEnvironment.projectRoot.appendingPathComponent("ops/grafana/livedelivery.json")

    @Test("every rule and every dashboard panel evaluates to data on real workers")
    func rulesAndPanelsHaveData() async throws {
        try await Fixture.with("prometheus") { fixture in
            // The shipped configuration with the sweeper's limits short, so that the load includes sweeps.
            let config = try fixture.config { policy in
                var sweep = policy["sweep"] as? [String: Any] ?? [:]
                sweep["idleSeconds"] = 10
                sweep["adoptionTimeoutSeconds"] = 10
                policy["sweep"] = sweep
            }
            let environment = [
                "LIVEDELIVERY_CONFIG_DIR": config.path, "LIVEDELIVERY_METRICS_SAMPLE_SECONDS": "1",
                "LIVEDELIVERY_DISPATCHER_PAUSE_SECONDS": "1", "LIVEDELIVERY_SWEEPER_INTERVAL_SECONDS": "0.5",
            ]
            let workers = [
                try await fixture.startWorker("w1", extraEnvironment: environment),
                try await fixture.startWorker("w2", extraEnvironment: environment),
            ]
            // The test's workers use queue names of their own: the rules and panels select queues by role.
            let prometheus = try await RunningPrometheus.start(
                in: fixture.directory, targets: workers.map(\.metricsPort))
            do {
                // The load: deliveries, APNs refusing a few pushes (retried) and one app's topic (paused),
                // a malformed event (dead-lettered, rejected), and orders left idle (swept).
                fixture.simulator.injectFault(FaultRule(status: 500, reason: "InternalServerError", count: 3))
                fixture.simulator.injectFault(FaultRule(status: 400, reason: "BadTopic", count: 1))
                let scenario = Scenario.deliveries(orders: 12, prefix: fixture.name)
                let idle = Scenario.deliveries(orders: 2, prefix: fixture.name + "-idle")
                // placed, confirmed and the activity's token: then nothing more, so the sweeper ends it.
                let stranded = idle.orders.flatMap { order in
                    idle.events.filter { $0.orderID == order.orderID }.prefix(3)
                }
                try await fixture.publish(scenario.events + stranded)
                try await fixture.publish([("order.status", Array("not json".utf8), "bad-\(fixture.name)")])
                try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
                try await eventually(
                    "a sweep, a pause and a dead letter in the workers' metrics", timeout: .seconds(120)
                ) {
                    var text = ""
                    for worker in workers { text += try await worker.get("/metrics").body }
                    let missing = [
                        "livedelivery_sweeps_total{", "livedelivery_paused_apps_total{",
                        "livedelivery_dead_letters_total{",
                    ]
                    .filter { !text.contains($0) }
                    guard missing.isEmpty else { throw HarnessError("not yet: \(missing)") }
                    return true
                }

                let health = try await eventuallyValue("the rules to be evaluated", timeout: .seconds(60)) {
                    let rules = try await prometheus.rules()
                    return rules.allSatisfy { $0.evaluated } && !rules.isEmpty ? rules : nil
                }
                for rule in health {
                    #expect(rule.health == "ok", "\(rule.name): \(rule.health) \(rule.lastError ?? "")")
                }
                let recorded = health.filter { $0.type == "recording" }.map(\.name)
                #expect(recorded.count >= 5)
                let panels = try Self.panelExpressions()
                #expect(panels.count >= 30)
                for expression in recorded + panels {
                    try await eventually("data for \(expression)", timeout: .seconds(90), every: .milliseconds(500)) {
                        try await prometheus.query(expression) > 0
                    }
                }
            } catch {
                print("── prometheus (last lines)\n\(prometheus.process.tail(30))")
                await prometheus.process.stop()
                throw error
            }
            await prometheus.process.stop()
        }
    }

    /// Every `expr` of the dashboard's panels, with Grafana's variables given values.
    static func panelExpressions() throws -> [String] {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: dashboard)) as! [String: Any]
        var expressions: [String] = []
        func walk(_ panels: [[String: Any]]) {
            for panel in panels {
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    if let expr = target["expr"] as? String { expressions.append(expr) }
                }
                walk(panel["panels"] as? [[String: Any]] ?? [])
            }
        }
        walk(json["panels"] as? [[String: Any]] ?? [])
        return expressions.map {
            $0.replacingOccurrences(of: "$__rate_interval", with: "1m").replacingOccurrences(
                of: "$instance", with: ".*"
            )
            .replacingOccurrences(of: "$app", with: ".*").replacingOccurrences(of: "$cell", with: ".*")
        }
    }
}

/// A Prometheus server of the test's own: scraping the workers every second, evaluating the rules
/// every second, on a free loopback port, its data in the test's folder.
struct RunningPrometheus {
    let process: ChildProcess
    let port: Int

    struct Rule {
        var name: String
        var type: String
        var health: String
        var lastError: String?
        var evaluated: Bool
    }

    static func start(in directory: URL, targets: [Int]) async throws -> RunningPrometheus {
        let port = try freePort()
        let targetList = targets.map { "'127.0.0.1:\($0)'" }.joined(separator: ", ")
        let config = """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files: ['\(PrometheusTests.rules.path)']
            scrape_configs:
              - job_name: livedelivery
                static_configs:
                  - targets: [\(targetList)]
            """
        let configFile = directory.appendingPathComponent("prometheus.yml")
        try config.write(to: configFile, atomically: true, encoding: .utf8)
        let process = try ChildProcess(
            name: "prometheus", executable: "/usr/bin/prometheus",
            arguments: [
                "--config.file=\(configFile.path)",
                "--storage.tsdb.path=\(directory.appendingPathComponent("tsdb").path)",
                "--web.listen-address=127.0.0.1:\(port)",
            ],
            environment: ProcessInfo.processInfo.environment,
            outputPath: directory.appendingPathComponent("prometheus.log").path)
        let running = RunningPrometheus(process: process, port: port)
        try await eventually("Prometheus to be ready", timeout: .seconds(60)) {
            if let status = process.exitStatus { throw HarnessError("prometheus exited \(status):\n\(process.tail())") }
            return try await running.get("/-/ready").contains("Ready")
        }
        return running
    }

    func get(_ path: String) async throws -> String {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        return String(decoding: data, as: UTF8.self)
    }

    /// How many series an instant query returns; throws on a query Prometheus refuses.
    func query(_ expression: String) async throws -> Int {
        var components = URLComponents(string: "http://127.0.0.1:\(port)/api/v1/query")!
        components.queryItems = [URLQueryItem(name: "query", value: expression)]
        let (data, _) = try await URLSession.shared.data(from: components.url!)
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        guard json?["status"] as? String == "success", let result = (json?["data"] as? [String: Any])?["result"] else {
            throw HarnessError("Prometheus refused \(expression): \(String(decoding: data, as: UTF8.self))")
        }
        return (result as? [Any])?.count ?? 0
    }

    func rules() async throws -> [Rule] {
        let data = Data(try await get("/api/v1/rules").utf8)
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let groups = (json?["data"] as? [String: Any])?["groups"] as? [[String: Any]] ?? []
        return groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }.map { rule in
            Rule(
                name: rule["name"] as? String ?? "", type: rule["type"] as? String ?? "",
                health: rule["health"] as? String ?? "", lastError: rule["lastError"] as? String,
                evaluated: (rule["lastEvaluation"] as? String).map { !$0.hasPrefix("0001-") } ?? false)
        }
    }

    /// A loopback port nothing listens on now (the kernel's choice for a socket bound to port 0).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw HarnessError("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(descriptor, raw, length) == 0 else { return -1 }
                return getsockname(descriptor, raw, &length)
            }
        }
        guard bound == 0 else { throw HarnessError("bind() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
