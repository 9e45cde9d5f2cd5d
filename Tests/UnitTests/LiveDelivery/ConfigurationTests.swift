import Foundation
import LiveDelivery
import Postgres
import RabbitMQ
import TestSupport
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    /// A config folder with the shipped policy and mapping, an apps file and a key file.
    func folder(fileJSON: String? = nil) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(TestEnvironment.uniqueName("cfg"))
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let shipped = TestEnvironment.projectRoot.appendingPathComponent("Config")
        for name in ["policy.json", "content-mapping.json"] {
            try FileManager.default.copyItem(
                at: shipped.appendingPathComponent(name), to: folder.appendingPathComponent(name))
        }
        try Data("not checked here".utf8).write(to: folder.appendingPathComponent("key.p8"))
        try Data(
            #"[{"bundleID":"com.example.delivery","teamID":"T1","keyID":"K1","keyFile":"key.p8","environment":"production"}]"#
                .utf8
        ).write(to: folder.appendingPathComponent("apns-apps.json"))
        if let fileJSON { try Data(fileJSON.utf8).write(to: folder.appendingPathComponent("livedelivery.json")) }
        return folder
    }

    @Test("precedence: overrides > environment > livedelivery.json > defaults; URLs are redacted in the summary")
    func precedence() async throws {
        let directory = try folder(
            fileJSON: #"{"amqp": {"prefetch": 17, "queue": "from-file"}, "http": {"port": 7000}}"#)
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path,
            "LIVEDELIVERY_AMQP_URL": "amqp://user:s3cret@127.0.0.1:5672/%2F",
            "LIVEDELIVERY_POSTGRES_URL": "postgresql://user:pw-secret@127.0.0.1:5432/db",
            "LIVEDELIVERY_AMQP_QUEUE": "from-env",
            "LIVEDELIVERY_APNS_BASE_URL": "https://127.0.0.1:8443",
        ]
        let reader = try await WorkerConfiguration.makeReader(environment: environment, overrides: ["http.port": "0"])
        let configuration: WorkerConfiguration
        do {
            configuration = try WorkerConfiguration.load(config: reader)
        } catch {
            Issue.record("\(error)")
            return
        }
        #expect(configuration.amqp.prefetch == 17)
        #expect(configuration.amqp.queue == "from-env")
        #expect(configuration.amqp.exchange == "delivery.events")
        #expect(configuration.http.port == 0)
        #expect(configuration.apns.baseURL == "https://127.0.0.1:8443")
        #expect(configuration.apns.apps.map(\.bundleID) == ["com.example.delivery"])
        let summary = configuration.summary.joined(separator: "\n")
        #expect(!summary.contains("s3cret"))
        #expect(!summary.contains("pw-secret"))
    }

    @Test("a cluster's nodes, a failover connection string and a reporting replica; no password in the summary")
    func clusterAndReplica() async throws {
        let directory = try folder(
            fileJSON: #"{"amqp": {"urls": ["amqp://u:file-secret@n1/%2F", "amqp://u:file-secret@n2/%2F"]}}"#)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fromFile = try WorkerConfiguration.load(
            config: try await WorkerConfiguration.makeReader(environment: [
                "LIVEDELIVERY_CONFIG_DIR": directory.path, "LIVEDELIVERY_AMQP_URL": "amqp://u:one@n0/%2F",
                "LIVEDELIVERY_POSTGRES_URL": "postgresql://u@db/ld",
            ]))
        #expect(fromFile.amqp.endpoints.nodes.map(\.host) == ["n1", "n2"], "amqp.urls wins over amqp.url")
        let environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path,
            "LIVEDELIVERY_AMQP_URLS":
                "amqp://u:env-secret@n1:5672/%2F,amqp://u:env-secret@n2:5673/%2F,amqp://u:env-secret@n3/%2F",
            "LIVEDELIVERY_POSTGRES_URL":
                "host=db1,db2 port=5432,5433 user=u password=pg-secret dbname=ld target_session_attrs=read-write",
            "LIVEDELIVERY_POSTGRES_REPORTING_URL": "postgresql://alice:replica-secret@db2:5433/ld",
        ]
        let configuration = try WorkerConfiguration.load(
            config: try await WorkerConfiguration.makeReader(environment: environment))
        #expect(configuration.amqp.endpoints.nodes.map(\.port) == [5672, 5673, 5672])
        #expect(configuration.postgres.connection.value("target_session_attrs") == "read-write")
        #expect(configuration.postgres.reporting?.value("user") == "alice")
        let summary = configuration.summary.joined(separator: "\n")
        for secret in ["file-secret", "env-secret", "pg-secret", "replica-secret"] {
            #expect(!summary.contains(secret))
        }
        #expect(summary.contains("host=db1,db2"))
    }

    /// Malformed connection settings are refused with the key and the reason, never with their text.
    @Test(arguments: [
        ["LIVEDELIVERY_AMQP_URL": "amqp//u:bad-secret@h"],
        ["LIVEDELIVERY_AMQP_URLS": "amqp://u:bad-secret@h/%2F,http://u:bad-secret@h2"],
        ["LIVEDELIVERY_POSTGRES_URL": "host=h password bad-secret"],
        ["LIVEDELIVERY_POSTGRES_URL": "postgresql://u:bad-secret@h/d?x"],
        ["LIVEDELIVERY_POSTGRES_URL": "mysql://u:bad-secret@h/d"],
        ["LIVEDELIVERY_POSTGRES_REPORTING_URL": "postgresql://u:bad-secret@[::1/d"],
    ])
    func malformedConnectionSettings(_ bad: [String: String]) async throws {
        let directory = try folder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path, "LIVEDELIVERY_AMQP_URL": "amqp://u:p@h/%2F",
            "LIVEDELIVERY_POSTGRES_URL": "postgresql://u@h/d",
        ].merging(bad) { $1 }
        let reader = try await WorkerConfiguration.makeReader(environment: environment)
        let error = #expect(throws: LiveDeliveryError.self) { try WorkerConfiguration.load(config: reader) }
        let text = error.map { "\($0)" } ?? ""
        #expect(!text.contains("bad-secret"), "\(text)")
        #expect(text.contains(bad.keys.first!), "the problem names its variable: \(text)")
    }

    @Test("secrets from files that …_FILE variables name; check-config says where each came from, never its value")
    func secretsFromFiles() async throws {
        let directory = try folder(
            fileJSON: #"{"postgres": {"reportingUrl": "postgresql://r:json-secret@replica/db"}}"#)
        defer { try? FileManager.default.removeItem(at: directory) }
        let nodes = directory.appendingPathComponent("amqp_urls")
        let database = directory.appendingPathComponent("postgres_url")
        // One node a line, and the usual trailing line break of `echo` or an editor.
        try Data("amqp://u:node-secret@rmq1:5672/%2F\namqp://u:node-secret@rmq2:5672/%2F\n".utf8).write(to: nodes)
        try Data("postgresql://u:db-secret@db1:5432/livedelivery\r\n".utf8).write(to: database)
        let reader = try await WorkerConfiguration.makeReader(environment: [
            "LIVEDELIVERY_CONFIG_DIR": directory.path,
            "LIVEDELIVERY_AMQP_URLS_FILE": nodes.path,
            "LIVEDELIVERY_POSTGRES_URL_FILE": database.path,
        ])
        let configuration = try WorkerConfiguration.load(config: reader)
        #expect(configuration.amqp.endpoints.nodes.count == 2)
        #expect(configuration.postgres.connection.environment["PGHOST"] == "db1")
        #expect(configuration.postgres.connection.environment["PGPASSWORD"] == "db-secret")
        let summary = configuration.summary.joined(separator: "\n")
        #expect(summary.contains("(from the file LIVEDELIVERY_AMQP_URLS_FILE names, \(nodes.path))"), "\(summary)")
        #expect(summary.contains("(from the file LIVEDELIVERY_POSTGRES_URL_FILE names, \(database.path))"))
        #expect(summary.contains("postgres.reportingUrl: ") && summary.contains("(from livedelivery.json)"))
        for secret in ["node-secret", "db-secret", "json-secret"] { #expect(!summary.contains(secret)) }

        // The environment variable itself still works, and says so.
        let plain = try WorkerConfiguration.load(
            config: try await WorkerConfiguration.makeReader(environment: [
                "LIVEDELIVERY_CONFIG_DIR": directory.path, "LIVEDELIVERY_AMQP_URL": "amqp://u:p@h/%2F",
                "LIVEDELIVERY_POSTGRES_URL_FILE": database.path,
            ]))
        #expect(
            plain.summary.contains {
                $0.hasPrefix("amqp.urls: ") && $0.hasSuffix("(from environment LIVEDELIVERY_AMQP_URL)")
            })
    }

    /// A `…_FILE` that cannot be used is refused with the variable and the path, never with the file's text or
    /// the other variable's value.
    @Test(arguments: ["missing", "empty", "two lines", "both set"])
    func unusableSecretFile(_ case: String) async throws {
        let directory = try folder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("postgres_url")
        var environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path, "LIVEDELIVERY_AMQP_URL": "amqp://u:p@h/%2F",
            "LIVEDELIVERY_POSTGRES_URL_FILE": file.path,
        ]
        let expected: String
        switch `case` {
        case "missing":
            expected = "LIVEDELIVERY_POSTGRES_URL_FILE: \(file.path): no such file"
        case "empty":
            try Data("\n  \n".utf8).write(to: file)
            expected = "LIVEDELIVERY_POSTGRES_URL_FILE: \(file.path) is empty"
        case "two lines":
            try Data("postgresql://u:file-secret@a/d\npostgresql://u:file-secret@b/d\n".utf8).write(to: file)
            expected = "LIVEDELIVERY_POSTGRES_URL_FILE: \(file.path) holds 2 lines; the value is one line"
        default:
            try Data("postgresql://u:file-secret@a/d".utf8).write(to: file)
            environment["LIVEDELIVERY_POSTGRES_URL"] = "postgresql://u:env-secret@b/d"
            expected =
                "postgres.url: both LIVEDELIVERY_POSTGRES_URL and LIVEDELIVERY_POSTGRES_URL_FILE are set; set one of them"
        }
        let error = try await #require(throws: LiveDeliveryError.self) {
            try await WorkerConfiguration.makeReader(environment: environment)
        }
        #expect(error.message == expected)
        #expect(!"\(error)".contains("file-secret") && !"\(error)".contains("env-secret"))
    }

    @Test("every problem is reported at once, with the environment variable to set")
    func problems() async throws {
        let directory = try folder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path,
            "LIVEDELIVERY_AMQP_PREFETCH": "lots",
            "LIVEDELIVERY_DISPATCHER_MAX_ATTEMPTS": "0",
        ]
        let reader = try await WorkerConfiguration.makeReader(environment: environment)
        let error = try #require(throws: LiveDeliveryError.self) { try WorkerConfiguration.load(config: reader) }
        let text = error.problems.joined(separator: "\n")
        #expect(text.contains("LIVEDELIVERY_AMQP_URL"))
        #expect(text.contains("LIVEDELIVERY_POSTGRES_URL"))
        #expect(text.contains("amqp.prefetch"))
        #expect(text.contains("dispatcher.maxAttempts"))
    }

    @Test(
        "retention.days is 0 or at least the 7 days the database's upkeep keeps for a worker",
        arguments: [0, 3, 6, 7, 30])
    func retentionDays(_ days: Int) async throws {
        let directory = try folder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path, "LIVEDELIVERY_AMQP_URL": "amqp://u:p@h/%2F",
            "LIVEDELIVERY_POSTGRES_URL": "postgresql://u@h/d", "LIVEDELIVERY_RETENTION_DAYS": "\(days)",
        ]
        let reader = try await WorkerConfiguration.makeReader(environment: environment)
        if (1...6).contains(days) {
            let error = try #require(throws: LiveDeliveryError.self) { try WorkerConfiguration.load(config: reader) }
            #expect(
                error.problems.contains { $0.hasPrefix("retention.days must be 0 (keep everything) or at least 7") })
        } else {
            #expect(try WorkerConfiguration.load(config: reader).retention.days == days)
        }
    }

    @Test("docs/configuration.md shows the keys as WorkerConfiguration.keys declares them")
    func documentedKeys() throws {
        let document = try String(
            contentsOf: TestEnvironment.projectRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let start = try #require(document.range(of: "<!-- keys: livedelivery check-config --keys -->\n"))
        let end = try #require(
            document.range(of: "\n<!-- end of keys -->", range: start.upperBound..<document.endIndex))
        let documented = String(document[start.upperBound..<end.lowerBound])
        #expect(
            documented == WorkerConfiguration.keysTable,
            "docs/configuration.md differs from the keys: replace its table with `livedelivery check-config --keys`")
        // Every key is in the table once, and every environment variable it names is the key's.
        let names = WorkerConfiguration.keys.map(\.name)
        #expect(Set(names).count == names.count)
    }

    @Test("the summary shows every key's value in effect, secrets masked")
    func summaryShowsEveryKey() async throws {
        let directory = try folder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = [
            "LIVEDELIVERY_CONFIG_DIR": directory.path,
            "LIVEDELIVERY_AMQP_URL": "amqp://user:s3cret@127.0.0.1:5672/%2F",
            "LIVEDELIVERY_POSTGRES_URL": "postgresql://user:pw-secret@127.0.0.1:5432/db",
            "LIVEDELIVERY_DISPATCHER_HANDOFF_WAIT_SECONDS": "0.25",
        ]
        let reader = try await WorkerConfiguration.makeReader(environment: environment)
        let summary = try WorkerConfiguration.load(config: reader).summary
        for key in WorkerConfiguration.keys where key.name != "amqp.url" {
            #expect(summary.contains { $0.hasPrefix(key.name + ": ") }, "\(key.name)")
        }
        #expect(summary.contains("dispatcher.handoffWaitSeconds: 0.25"))
        #expect(summary.contains("app com.example.delivery (production) team T1 key K1"))
        #expect(!summary.joined().contains("s3cret") && !summary.joined().contains("pw-secret"))
    }
}
