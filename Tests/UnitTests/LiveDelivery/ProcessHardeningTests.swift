import Foundation
import LiveDelivery
import Testing

@Suite("Keys and dumps")
struct ProcessHardeningTests {
    @Test("a key its group or others may read is named, with its mode; one only its owner reads is not")
    func keyFileWarnings() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var apps: [WorkerConfiguration.App] = []
        for (name, mode) in [("owner.p8", 0o600), ("group.p8", 0o640), ("world.p8", 0o644), ("read-only.p8", 0o400)] {
            let path = folder.appendingPathComponent(name).path
            #expect(FileManager.default.createFile(atPath: path, contents: Data("key".utf8)))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
            apps.append(.init(bundleID: name, teamID: "T", keyID: "K", keyFile: path, environment: "production"))
        }
        // Two apps may share a key file: it is named once.
        apps.append(.init(bundleID: "again", teamID: "T", keyID: "K", keyFile: apps[2].keyFile, environment: "sandbox"))
        let warnings = ProcessHardening.keyFileWarnings(apps)
        #expect(warnings.count == 2, "\(warnings)")
        #expect(warnings.contains { $0.contains("group.p8") && $0.contains("mode 640") })
        #expect(warnings.contains { $0.contains("world.p8") && $0.contains("mode 644") && $0.contains("chmod 600") })
    }

    @Test("a key reached through symbolic links (a Kubernetes secret volume) is judged by the file they lead to")
    func keyFileThroughLinks() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var apps: [WorkerConfiguration.App] = []
        for (name, mode) in [("private.p8", 0o600), ("shared.p8", 0o644)] {
            // As Kubernetes mounts a secret: NAME -> ..data/NAME, ..data -> ..2025_01_01 (relative links).
            let version = folder.appendingPathComponent("..2025_\(name)")
            try FileManager.default.createDirectory(at: version, withIntermediateDirectories: true)
            let target = version.appendingPathComponent(name).path
            #expect(FileManager.default.createFile(atPath: target, contents: Data("key".utf8)))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: target)
            let data = folder.appendingPathComponent("..data-\(name)")
            try FileManager.default.createSymbolicLink(
                atPath: data.path, withDestinationPath: version.lastPathComponent)
            let link = folder.appendingPathComponent(name).path
            try FileManager.default.createSymbolicLink(
                atPath: link, withDestinationPath: "\(data.lastPathComponent)/\(name)")
            apps.append(.init(bundleID: name, teamID: "T", keyID: "K", keyFile: link, environment: "production"))
        }
        let warnings = ProcessHardening.keyFileWarnings(apps)
        #expect(warnings.count == 1, "\(warnings)")
        let warning = warnings.first ?? ""
        #expect(warning.contains("shared.p8") && warning.contains("mode 644"))
    }

    /// In a fresh process of its own (an exit test): dumpable at first, as every process; reading the
    /// configuration, which is how every command reaches a `…_FILE` secret, leaves it non-dumpable. It fails if
    /// the reader stops hardening the process.
    @Test("reading the configuration, every command's way to a secret, makes the process non-dumpable")
    func readingTheConfigurationHardensTheProcess() async {
        await #expect(processExitsWith: .success) {
            guard !ProcessHardening.isNonDumpable else { exit(2) }
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
            guard (try? "host=/tmp password=Sec-1\n".write(to: file, atomically: true, encoding: .utf8)) != nil else {
                exit(3)
            }
            defer { try? FileManager.default.removeItem(at: file) }
            guard
                (try? await WorkerConfiguration.makeReader(environment: [
                    "LIVEDELIVERY_POSTGRES_URL_FILE": file.path, "LIVEDELIVERY_CONFIG_DIR": "/nonexistent",
                ])) != nil
            else { exit(4) }
            exit(ProcessHardening.isNonDumpable ? 0 : 1)
        }
    }
}
