import APNsSimulator
import ChildProcesses
import Crypto
import Foundation
import TestSupport
import Testing

/// `livedelivery check-config` as an operator runs it: the real binary, stdout and stderr together.
/// Each bad setting must be named by its file and path (or key and environment variable), and no
/// secret may appear in the output in any form, whatever the input.
@Suite(.timeLimit(.minutes(6)))
struct CheckConfigTests {
    /// Passwords and key text planted in the inputs; none may be printed.
    static let amqpPassword = "AmqpPw-7f3a91"
    static let postgresPassword = "PgPw-c81d22"
    static let keyMarker = "KEYTEXTe4b1"

    /// A folder with a copy of the shipped Config, its key generated (as scripts/demo does) unless `withKey` is false.
    static func configFolder(withKey: Bool = true) throws -> (root: URL, config: URL) {
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent(TestEnvironment.uniqueName("check-config"))
        let config = root.appendingPathComponent("Config")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: TestEnvironment.projectRoot.appendingPathComponent("Config"), to: config)
        // A developer's own key must not make the fresh-clone check pass.
        try? FileManager.default.removeItem(at: config.appendingPathComponent("keys"))
        if withKey {
            try FileManager.default.createDirectory(
                at: config.appendingPathComponent("keys"), withIntermediateDirectories: true)
            try Data(P256.Signing.PrivateKey().pemRepresentation.utf8)
                .write(to: config.appendingPathComponent("keys/AuthKey_SIMKEY0001.p8"))
        }
        return (root, config)
    }

    /// Valid settings with planted passwords; no server is contacted without `--connect`.
    static func environment(config: URL) -> [String: String] {
        [
            "LIVEDELIVERY_CONFIG_DIR": config.path,
            "LIVEDELIVERY_AMQP_URL": "amqp://user:\(amqpPassword)@127.0.0.1:5672/%2F",
            "LIVEDELIVERY_POSTGRES_URL": "postgresql://user:\(postgresPassword)@127.0.0.1:5432/db",
            // check-config reads nothing `run` does not: a missing migrations folder is no problem.
            "LIVEDELIVERY_MIGRATIONS_DIR": "/nonexistent/sql",
        ]
    }

    /// Runs `livedelivery ARGS`; returns its exit status and its whole output.
    static func run(
        _ arguments: [String], environment: [String: String], in folder: URL, timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess.livedelivery(
            name: "check-\(UUID().uuidString.prefix(6))", arguments: arguments, environment: environment,
            logDirectory: folder)
        let status = try await child.waitForExit(timeout: timeout)
        return (status, child.output)
    }

    struct BadCase: Sendable, CustomStringConvertible {
        var name: String
        /// Changes to the environment (an empty value removes the variable).
        var environment: [String: String] = [:]
        /// Files written into the config folder, by name relative to it.
        var files: [String: String] = [:]
        /// Every one must appear in the output.
        var expected: [String]
        /// None may appear in the output.
        var secrets: [String] = []
        var description: String { name }
    }

    static let badCases: [BadCase] = [
        BadCase(
            name: "malformed AMQP URL",
            environment: ["LIVEDELIVERY_AMQP_URL": "amqp://user:Sec-amqp-1@127.0.0.1:notaport/%2F"],
            expected: ["amqp.url", "LIVEDELIVERY_AMQP_URL"], secrets: ["Sec-amqp-1"]),
        BadCase(
            name: "a malformed node among several",
            environment: [
                "LIVEDELIVERY_AMQP_URL": "",
                "LIVEDELIVERY_AMQP_URLS": "amqp://a:Sec-node-1@127.0.0.1:5672/%2F,ftp://b:Sec-node-2@h2:5672/",
            ],
            expected: ["amqp.urls", "LIVEDELIVERY_AMQP_URLS"], secrets: ["Sec-node-1", "Sec-node-2"]),
        BadCase(
            name: "libpq words with a password and an unknown option",
            environment: ["LIVEDELIVERY_POSTGRES_URL": "host=db password=Sec-pg-1 bogus_option=1"],
            expected: ["postgres.url", "LIVEDELIVERY_POSTGRES_URL"], secrets: ["Sec-pg-1"]),
        BadCase(
            name: "libpq words with an unterminated quote after the password",
            environment: ["LIVEDELIVERY_POSTGRES_URL": "password=Sec-pg-2 host='db"],
            expected: ["postgres.url", "LIVEDELIVERY_POSTGRES_URL"], secrets: ["Sec-pg-2"]),
        BadCase(
            name: "a postgres URL with a password and a broken host",
            environment: ["LIVEDELIVERY_POSTGRES_URL": "postgresql://user:Sec-pg-3@[::1/db"],
            expected: ["postgres.url", "LIVEDELIVERY_POSTGRES_URL"], secrets: ["Sec-pg-3"]),
        BadCase(
            name: "a reporting URL that is not valid",
            environment: ["LIVEDELIVERY_POSTGRES_REPORTING_URL": "password=Sec-pg-4 nonsense"],
            expected: ["postgres.reportingUrl", "LIVEDELIVERY_POSTGRES_REPORTING_URL"], secrets: ["Sec-pg-4"]),
        BadCase(
            name: "no broker and no database",
            environment: ["LIVEDELIVERY_AMQP_URL": "", "LIVEDELIVERY_POSTGRES_URL": ""],
            expected: ["LIVEDELIVERY_AMQP_URL", "LIVEDELIVERY_POSTGRES_URL"]),
        BadCase(
            name: "a wrong type in livedelivery.json",
            files: ["livedelivery.json": #"{"amqp": {"prefetch": "many"}}"#],
            expected: ["livedelivery.json: amqp.prefetch"]),
        BadCase(
            name: "livedelivery.json that is not JSON",
            files: ["livedelivery.json": #"{"amqp": "#],
            expected: ["livedelivery.json"]),
        BadCase(
            name: "a value out of range in the environment",
            environment: ["LIVEDELIVERY_AMQP_PREFETCH": "lots", "LIVEDELIVERY_DISPATCHER_MAX_ATTEMPTS": "0"],
            expected: ["amqp.prefetch", "LIVEDELIVERY_AMQP_PREFETCH", "dispatcher.maxAttempts"]),
        BadCase(
            name: "a wrong type in policy.json",
            files: ["policy.json": #"{"statuses": {"delivered": {"dismissAfterSeconds": "soon"}}}"#],
            expected: ["Config/policy.json: statuses.delivered.dismissAfterSeconds"]),
        BadCase(
            name: "a missing apps file",
            environment: ["LIVEDELIVERY_APNS_APPS_FILE": "/nonexistent/apns-apps.json"],
            expected: ["/nonexistent/apns-apps.json", "LIVEDELIVERY_APNS_APPS_FILE"]),
        BadCase(
            name: "an apps entry with a wrong type",
            files: [
                "apns-apps.json":
                    #"[{"bundleID": 5, "teamID": "T", "keyID": "K", "keyFile": "k.p8", "environment": "production"}]"#
            ],
            expected: ["apns-apps.json: [0].bundleID"]),
        BadCase(
            name: "an apps entry without its key file",
            files: ["apns-apps.json": #"[{"bundleID": "a.b", "teamID": "T", "keyID": "K", "environment": "sandbox"}]"#],
            expected: ["apns-apps.json: [0].keyFile"]),
        BadCase(
            name: "an apps file that is not an array",
            files: ["apns-apps.json": #"{"bundleID": "a.b"}"#],
            expected: ["apns-apps.json: must be an array"]),
        BadCase(
            name: "a key file that is not a key",
            files: [
                "keys/AuthKey_SIMKEY0001.p8": "-----BEGIN PRIVATE KEY-----\n\(keyMarker)\n-----END PRIVATE KEY-----\n"
            ],
            expected: ["apns-apps.json: [0].keyFile", "not an APNs key"], secrets: [keyMarker]),
        BadCase(
            name: "a CA file that does not exist",
            environment: ["LIVEDELIVERY_APNS_CA_FILE": "/nonexistent/ca.pem"],
            expected: ["apns.caFile", "LIVEDELIVERY_APNS_CA_FILE"]),
    ]

    @Test("a bad setting is named by its file and path or its variable, and no secret is printed", arguments: badCases)
    func badSetting(_ bad: BadCase) async throws {
        let (root, config) = try Self.configFolder()
        defer { try? FileManager.default.removeItem(at: root) }
        for (name, text) in bad.files {
            try Data(text.utf8).write(to: config.appendingPathComponent(name))
        }
        let key = try String(contentsOf: config.appendingPathComponent("keys/AuthKey_SIMKEY0001.p8"), encoding: .utf8)
        var environment = Self.environment(config: config)
        for (name, value) in bad.environment { environment[name] = value.isEmpty ? nil : value }

        let (status, output) = try await Self.run(["check-config"], environment: environment, in: root)
        #expect(status == 1, "\(bad): exit status\n\(output)")
        for text in bad.expected {
            #expect(output.contains(text), "\(bad): the output names \(text)\n\(output)")
        }
        let keyBody = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        for secret in [Self.amqpPassword, Self.postgresPassword] + bad.secrets + keyBody.map(String.init) {
            #expect(!output.contains(secret), "\(bad): the output shows a secret\n\(output)")
        }
        #expect(!output.contains("Fatal error"), "\(bad): no crash\n\(output)")
    }

    @Test("on a fresh clone the shipped Config fails with where the key goes, and passes once a key is there")
    func freshClone() async throws {
        let (root, config) = try Self.configFolder(withKey: false)
        defer { try? FileManager.default.removeItem(at: root) }
        let environment = Self.environment(config: config)

        let (status, output) = try await Self.run(["check-config"], environment: environment, in: root)
        #expect(status == 1, "\(output)")
        let keyPath = config.appendingPathComponent("keys/AuthKey_SIMKEY0001.p8").path
        #expect(output.contains("apns-apps.json: [0].keyFile: no key at \(keyPath)"), "\(output)")
        #expect(output.contains("APNs key"), "\(output)")
        #expect(output.contains("scripts/demo"), "\(output)")
        #expect(output.contains("apns-sim keygen --out \(keyPath)"), "\(output)")
        #expect(!output.contains("Fatal error"), "\(output)")
        // The only problem: everything else as shipped is valid.
        #expect(output.components(separatedBy: "\n  - ").count == 2, "\(output)")

        // The key placed where the message says (scripts/demo writes the same file).
        try FileManager.default.createDirectory(
            at: config.appendingPathComponent("keys"), withIntermediateDirectories: true)
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        let (passed, summary) = try await Self.run(["check-config"], environment: environment, in: root)
        #expect(passed == 0, "\(summary)")
        #expect(summary.contains("app com.example.pizza (production)"), "\(summary)")
        for secret in [Self.amqpPassword, Self.postgresPassword] {
            #expect(!summary.contains(secret), "\(summary)")
        }
    }

    @Test("the shipped apps file names the bundle id the example events use")
    func shippedAppMatchesExamples() throws {
        let apps = try JSONSerialization.jsonObject(
            with: Data(contentsOf: TestEnvironment.projectRoot.appendingPathComponent("Config/apns-apps.json")))
        let bundleIDs = Set(((apps as? [[String: Any]]) ?? []).compactMap { $0["bundleID"] as? String })
        let examples = try FileManager.default.contentsOfDirectory(
            at: TestEnvironment.projectRoot.appendingPathComponent("examples"), includingPropertiesForKeys: nil
        ).filter { $0.pathExtension == "jsonl" }
        #expect(!examples.isEmpty)
        for file in examples {
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                guard let event = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let bundleID = Self.bundleID(in: event)
                else { continue }
                #expect(bundleIDs.contains(bundleID), "\(file.lastPathComponent): \(bundleID) is not in apns-apps.json")
            }
        }
    }

    /// The first `bundle_id` anywhere in the event.
    static func bundleID(in value: Any) -> String? {
        if let object = value as? [String: Any] {
            if let id = object["bundle_id"] as? String { return id }
            for child in object.values { if let id = bundleID(in: child) { return id } }
        } else if let array = value as? [Any] {
            for child in array { if let id = bundleID(in: child) { return id } }
        }
        return nil
    }

    @Test(
        "--connect reaches the broker, the database and the APNs host, and names an unreachable node without its password"
    )
    func connect() async throws {
        try await Fixture.with("check-connect") { fixture in
            var environment = fixture.environment(worker: "check")
            environment["LIVEDELIVERY_MIGRATIONS_DIR"] = "/nonexistent/sql"
            let (status, output) = try await Self.run(
                ["check-config", "--connect"], environment: environment, in: fixture.directory)
            #expect(status == 0, "\(output)")
            let node = output.split(separator: "\n").first { $0.hasPrefix("connect: amqp node 1 (") }
            #expect(node?.hasSuffix("): ok") == true, "\(output)")
            #expect(output.contains("connect: postgres: ok (PostgreSQL"), "\(output)")
            #expect(output.contains(", primary)"), "\(output)")
            let apnsHost = URL(string: fixture.simulator.baseURL)?.host ?? "?"
            #expect(output.contains("connect: apns production (\(apnsHost)): ok (answered HTTP"), "\(output)")
            #expect(output.contains("check-config: all 3 targets reached"), "\(output)")
            Self.expectNoPasswords(output, urls: [fixture.amqpURL, fixture.postgresURL])

            // A second node and a database nobody listens on: each reported on its line, by position and
            // address, never with its password.
            environment["LIVEDELIVERY_AMQP_URL"] = nil
            environment["LIVEDELIVERY_AMQP_URLS"] = "\(fixture.amqpURL),amqp://guest:Sec-down-9@127.0.0.1:1/%2F"
            environment["LIVEDELIVERY_POSTGRES_URL"] = "postgresql://user:Sec-down-8@127.0.0.1:1/db"
            let (failed, report) = try await Self.run(
                ["check-config", "--connect"], environment: environment, in: fixture.directory)
            #expect(failed == 1, "\(report)")
            let lines = report.split(separator: "\n")
            #expect(lines.first { $0.hasPrefix("connect: amqp node 1 (") }?.hasSuffix("): ok") == true, "\(report)")
            let second = lines.first { $0.hasPrefix("connect: amqp node 2 (127.0.0.1:1): ") }
            #expect(second != nil && second?.hasSuffix(": ok") == false, "\(report)")
            let database = lines.first { $0.hasPrefix("connect: postgres: ") }
            #expect(database != nil && database?.hasPrefix("connect: postgres: ok") == false, "\(report)")
            #expect(report.contains("2 of 4 targets could not be used"), "\(report)")
            #expect(!report.contains("Sec-down-9") && !report.contains("Sec-down-8"), "\(report)")
            Self.expectNoPasswords(report, urls: [fixture.amqpURL, fixture.postgresURL])
        }
    }

    /// The URLs' passwords appear nowhere, in URL or libpq form (the services' password may equal
    /// their user name, so the bare word is not checked).
    static func expectNoPasswords(_ output: String, urls: [String]) {
        for url in urls {
            guard let password = URLComponents(string: url)?.password, !password.isEmpty else { continue }
            #expect(!output.contains(":\(password)@"), "\(output)")
            #expect(!output.contains("password=\(password)"), "\(output)")
        }
    }
}
