import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on 127.0.0.1 that accepts connections and never sends a byte (so a TLS
/// handshake never completes). Its thread blocks in `accept`, never the cooperative pool.
final class StalledServer: Sendable {
    let port: Int
    /// One element per accepted connection.
    let accepted: AsyncStream<Void>
    private let listener: LoopbackSocket
    private let connections = Mutex<[Int32]>([])

    init() throws {
        listener = try LoopbackSocket.bound(port: 0)
        port = listener.port
        guard listen(listener.fd, 16) == 0 else {
            listener.close()
            throw NGHTTPDServer.ServerError(description: "listen() failed")
        }
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        accepted = stream
        let fd = listener.fd
        let thread = Thread { [self] in
            while true {
                let connection = accept(fd, nil, nil)
                if connection < 0 { break }
                connections.withLock { $0.append(connection) }
                continuation.yield()
            }
            continuation.finish()
        }
        thread.start()
    }

    /// Stops accepting and closes every connection.
    func close() {
        shutdown(listener.fd, Int32(SHUT_RDWR))
        listener.close()
        for connection in connections.withLock({ $0 }) { _ = Glibc.close(connection) }
    }
}
