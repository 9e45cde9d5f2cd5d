import Foundation
import TestSupport

/// A temporary folder with a self-signed certificate for `localhost`/127.0.0.1, a second unrelated
/// one (the "wrong CA"), and a small document root.
final class TLSFixture: Sendable {
    let directory: URL
    var keyPath: String { directory.appendingPathComponent("key.pem").path }
    var certificatePath: String { directory.appendingPathComponent("cert.pem").path }
    var otherCertificatePath: String { directory.appendingPathComponent("other-cert.pem").path }
    var documentRoot: String { directory.appendingPathComponent("htdocs").path }

    static let indexText = "hello from nghttpd\n"

    private init(directory: URL) {
        self.directory = directory
    }

    static func make() async throws -> TLSFixture {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent(TestEnvironment.uniqueName("http2-tests"))
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("htdocs"),
            withIntermediateDirectories: true
        )
        let fixture = TLSFixture(directory: directory)
        try indexText.write(toFile: fixture.documentRoot + "/index.txt", atomically: true, encoding: .utf8)
        try "".write(toFile: fixture.documentRoot + "/empty", atomically: true, encoding: .utf8)
        try await generate(key: fixture.keyPath, certificate: fixture.certificatePath, in: directory)
        try await generate(
            key: directory.appendingPathComponent("other-key.pem").path,
            certificate: fixture.otherCertificatePath,
            in: directory
        )
        return fixture
    }

    private static func generate(key: String, certificate: String, in directory: URL) async throws {
        try await runQuietly(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ]
        )
    }

    /// Runs a program to completion with its output discarded (openssl chatters on stderr).
    private static func runQuietly(_ executable: String, _ arguments: [String]) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        guard status == 0 else {
            throw NGHTTPDServer.ServerError(description: "\(executable) exited with status \(status)")
        }
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
