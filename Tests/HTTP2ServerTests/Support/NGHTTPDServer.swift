import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Owns one `nghttpd` process: HTTP/2 over TLS (never h2c), on 127.0.0.1, by default with
/// `--echo-upload` (a POST's body comes back as the response body).
final class NGHTTPDServer: Sendable {
    let port: Int
    let fixture: TLSFixture
    let echo: Bool
    private let process: Mutex<Process?>

    var baseURL: String { "https://localhost:\(port)" }

    private init(port: Int, fixture: TLSFixture, echo: Bool, process: Process) {
        self.port = port
        self.fixture = fixture
        self.echo = echo
        self.process = Mutex(process)
    }

    /// Starts nghttpd on `port`, or on a free port when `nil` (retrying if another process took it).
    static func start(fixture: TLSFixture, port: Int? = nil, echo: Bool = true) async throws -> NGHTTPDServer {
        for _ in 0..<10 {
            let candidate = try port ?? freeLoopbackPort()
            if let process = try await launch(fixture: fixture, port: candidate, echo: echo) {
                return NGHTTPDServer(port: candidate, fixture: fixture, echo: echo, process: process)
            }
        }
        throw ServerError(description: "nghttpd did not start")
    }

    /// Starts it again on the same port (after ``stop()``).
    func restart() async throws {
        for _ in 0..<50 {
            if let launched = try await Self.launch(fixture: fixture, port: port, echo: echo) {
                process.withLock { $0 = launched }
                return
            }
        }
        throw ServerError(description: "nghttpd did not restart on port \(port)")
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing.
    func pause() {
        if let pid = process.withLock({ $0?.processIdentifier }) { kill(pid, SIGSTOP) }
    }

    /// SIGKILL and wait for the exit (the kernel then resets its connections).
    func stop() async {
        guard let running = process.withLock({ $0.take() }) else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            running.terminationHandler = { _ in continuation.resume() }
            if !running.isRunning {
                running.terminationHandler = nil
                continuation.resume()
                return
            }
            kill(running.processIdentifier, SIGKILL)
        }
    }

    deinit {
        if let running = process.withLock({ $0 }), running.isRunning { kill(running.processIdentifier, SIGKILL) }
    }

    /// Launches nghttpd and waits until it accepts TCP connections; `nil` if it exited (port taken).
    private static func launch(fixture: TLSFixture, port: Int, echo: Bool) async throws -> Process? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpd")
        process.arguments =
            (echo ? ["--echo-upload"] : [])
            + ["-a", "127.0.0.1", "-d", fixture.documentRoot, String(port), fixture.keyPath, fixture.certificatePath]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Readiness: poll until the port accepts a connection or the process gives up.
        for _ in 0..<500 {
            if !process.isRunning { return nil }
            if canConnect(port: port) { return process }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(process.processIdentifier, SIGKILL)
        throw ServerError(description: "nghttpd did not listen on port \(port)")
    }

    struct ServerError: Error, CustomStringConvertible {
        let description: String
    }
}

/// A loopback port that was free a moment ago (bind port 0, read it, close).
func freeLoopbackPort() throws -> Int {
    let socket = try LoopbackSocket.bound(port: 0)
    defer { socket.close() }
    return socket.port
}

func canConnect(port: Int) -> Bool {
    let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { Glibc.close(fd) }
    var address = LoopbackSocket.address(port: port)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return result == 0
}

/// A TCP socket bound to 127.0.0.1.
struct LoopbackSocket: Sendable {
    let fd: Int32
    let port: Int

    static func bound(port: Int) throws -> LoopbackSocket {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw NGHTTPDServer.ServerError(description: "socket() failed") }
        var address = address(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            Glibc.close(fd)
            throw NGHTTPDServer.ServerError(description: "bind() failed")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return LoopbackSocket(fd: fd, port: Int(UInt16(bigEndian: actual.sin_port)))
    }

    static func address(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    func close() {
        _ = Glibc.close(fd)
    }
}

extension NGHTTPDServer {
    /// Bytes waiting unread in the server's established TCP connections (`ss`, i.e. the kernel's
    /// sock_diag): while the server is paused, these are requests that reached it.
    ///
    /// (`/proc/net/tcp` would serve too if read to its end, as `LocalServers.procFile` reads it: Foundation's one-read
    /// `String(contentsOfFile:)` of it stops after its first 27 sockets.)
    func unreadBytes() async throws -> Int {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ss")
        process.arguments = ["-tnH", "state", "established", "( sport = :\(port) )"]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let _: Void = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { _ in continuation.resume() }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        // ss printed a few lines (far less than a pipe buffer) and exited.
        let data = try output.fileHandleForReading.readToEnd() ?? Data()
        var total = 0
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            // Recv-Q Send-Q Local:Port Peer:Port
            if let first = line.split(separator: " ").first, let received = Int(first) { total += received }
        }
        return total
    }
}
