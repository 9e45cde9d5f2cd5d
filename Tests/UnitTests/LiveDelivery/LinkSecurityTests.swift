import Foundation
import LiveDelivery
import Postgres
import Testing

/// What `check-config`, `run`, `migrate` and the admin commands say of each link's protection.
struct LinkSecurityTests {
    @Test(
        "only localhost, 127.0.0.0/8 and ::1 are this machine; names that look like addresses are names",
        arguments: [
            ("localhost", true), ("LOCALHOST", true), ("127.0.0.1", true), ("127.1.2.3", true), ("::1", true),
            ("[::1]", true), ("0:0:0:0:0:0:0:1", true),
            ("127.evil.example", false), ("127.0.0.1.evil.example", false), ("localhost.evil.example", false),
            ("128.0.0.1", false), ("::2", false), ("[::1", false), ("db", false), ("", false),
        ])
    func loopback(_ host: String, _ isLoopback: Bool) {
        #expect(LinkFinding.isLoopback(host) == isLoopback)
    }

    @Test("a plain-text OTLP endpoint warns, naming the headers variable it sends and never its value")
    func plainTextTraceExport() throws {
        let secret = "api-key=Sec-otel-1"
        let plain = try #require(
            TraceExportSettings(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:Sec-otel-2@collector.example:4318",
                "OTEL_EXPORTER_OTLP_HEADERS": secret,
            ]).linkFinding)
        #expect(!plain.isLocal)
        #expect(plain.description.hasPrefix("warning: "))
        #expect(plain.message.contains("OTEL_EXPORTER_OTLP_HEADERS") && plain.message.contains("https://"))
        #expect(!plain.message.contains("Sec-otel"), "\(plain.message)")

        let local = TraceExportSettings(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"])
        #expect(local.linkFinding?.isLocal == true)
        #expect(
            TraceExportSettings(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318", "OTEL_EXPORTER_OTLP_HEADERS": secret,
            ]).linkFinding == nil)
        #expect(TraceExportSettings(environment: ["OTEL_EXPORTER_OTLP_HEADERS": secret]).linkFinding == nil)
    }

    @Test("a database link named by a name that starts with 127. is checked as a remote one")
    func databaseLink() throws {
        let remote = try #require(
            LinkFinding.finding(
                postgres: try PostgresConfiguration("host=127.evil.example sslmode=require"), name: "database"))
        #expect(!remote.isLocal)
        #expect(remote.message.contains("sslmode=verify-full"))
        let local = try #require(
            LinkFinding.finding(postgres: try PostgresConfiguration("host=127.0.0.1 sslmode=disable"), name: "database")
        )
        #expect(local.isLocal)
        #expect(
            LinkFinding.finding(
                postgres: try PostgresConfiguration("host=db.example sslmode=verify-full"), name: "database") == nil)
    }

    @Test("cells.<name>.postgresUrl reads its value from the file its …_FILE twin names")
    func cellPostgresURLFile() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cell-\(UUID().uuidString)")
        try "host=/tmp dbname=eu password=Sec-cell-1\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let config = try await WorkerConfiguration.makeReader(
            environment: [
                "LIVEDELIVERY_CELLS_EU_POSTGRES_URL_FILE": file.path, "LIVEDELIVERY_CONFIG_DIR": "/nonexistent",
            ])
        let postgres = try WorkerConfiguration.readPostgres(config, key: "cells.eu.postgresUrl")
        #expect(postgres.value("dbname") == "eu")

        await #expect {
            try await WorkerConfiguration.makeReader(environment: [
                "LIVEDELIVERY_CELLS_EU_POSTGRES_URL_FILE": file.path,
                "LIVEDELIVERY_CELLS_EU_POSTGRES_URL": "host=/tmp",
            ])
        } throws: { error in
            let message = "\(error)"
            return message.contains("LIVEDELIVERY_CELLS_EU_POSTGRES_URL_FILE") && !message.contains("Sec-cell")
        }
    }
}
