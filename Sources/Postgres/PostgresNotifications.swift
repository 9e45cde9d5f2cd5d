import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A notification sent with `NOTIFY channel, 'payload'` (or `pg_notify`).
package struct PostgresNotification: Sendable, Hashable {
    package var channel: String
    package var payload: String
    /// The server process of the session that sent it.
    package var processID: Int

    package init(channel: String, payload: String, processID: Int) {
        self.channel = channel
        self.payload = payload
        self.processID = processID
    }
}

extension PostgresClient {
    /// Notifications on one channel, from a dedicated connection outside the pool.
    ///
    /// Iterating starts a listener thread with its own connection; it runs `LISTEN` and yields `.listening`,
    /// then each notification. When the connection is lost it reconnects (with backoff), listens again and
    /// yields `.listening` again. Notifications are not queued for a disconnected listener, so treat them as a
    /// wake-up hint and re-scan the table on every `.listening`. The sequence ends when the iterating task is
    /// cancelled, the iterator is dropped, or the client shuts down.
    package func notifications(channel: String) -> PostgresNotifications {
        PostgresNotifications(client: self, channels: [channel])
    }

    /// Notifications on several channels over one dedicated connection.
    package func notifications(channels: [String]) -> PostgresNotifications {
        PostgresNotifications(client: self, channels: channels)
    }
}

/// The `AsyncSequence` of `PostgresClient.notifications(channel:)`. Each iterator owns one listener connection.
package struct PostgresNotifications: AsyncSequence, Sendable {
    package enum Event: Sendable, Hashable {
        /// `LISTEN` is in place: after connecting and after every reconnect. Anything sent while disconnected
        /// was missed.
        case listening
        case notification(PostgresNotification)
    }

    package typealias Element = Event
    package typealias Failure = Never

    let client: PostgresClient
    let channels: [String]

    package func makeAsyncIterator() -> AsyncIterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
        let listener = PostgresListener(
            configuration: client.configuration,
            channels: channels,
            continuation: continuation,
            logger: client.logger
        )
        continuation.onTermination = { _ in listener.stop() }
        if let id = client.register(listener) {
            listener.start { [client] in client.unregister(id) }
        } else {
            continuation.finish()  // the client is shut down
        }
        return AsyncIterator(base: stream.makeAsyncIterator(), stopper: Stopper(listener: listener))
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Event>.Iterator
        let stopper: Stopper

        package mutating func next() async -> Event? {
            await base.next(isolation: #isolation)
        }

        package mutating func next(isolation actor: isolated (any Actor)?) async -> Event? {
            await base.next(isolation: actor)
        }
    }

    /// Stops the listener when the last copy of the iterator goes away.
    final class Stopper: Sendable {
        let listener: PostgresListener
        init(listener: PostgresListener) { self.listener = listener }
        deinit { listener.stop() }
    }
}

/// One dedicated connection and thread running LISTEN: polls the socket (and a wake-up pipe for `stop()`),
/// reads with `PQconsumeInput`/`PQnotifies`, and reconnects after a loss.
final class PostgresListener: Sendable {
    private let parameters: [PostgresConfiguration.Parameter]
    private let channels: [String]
    private let continuation: AsyncStream<PostgresNotifications.Event>.Continuation
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Whether the thread has exited (its connection closed), and who waits for that.
    private let exit = Mutex<(exited: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    init(
        configuration: PostgresConfiguration,
        channels: [String],
        continuation: AsyncStream<PostgresNotifications.Event>.Continuation,
        logger: Logger
    ) {
        self.parameters = configuration.connectionParameters
        self.channels = channels
        self.continuation = continuation
        var logger = logger
        logger[metadataKey: PostgresLoggingKeys.channel] = "\(channels.joined(separator: ","))"
        self.logger = logger
        var descriptors: [Int32] = [-1, -1]
        if pipe(&descriptors) == 0 {
            for descriptor in descriptors {
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            }
        }
        wakeRead = descriptors[0]
        wakeWrite = descriptors[1]
    }

    deinit {
        if wakeRead >= 0 { close(wakeRead) }
        if wakeWrite >= 0 { close(wakeWrite) }
    }

    func start(onExit: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            run()
            onExit()
            let waiters = exit.withLock { exit in
                exit.exited = true
                defer { exit.waiters = [] }
                return exit.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = "postgres.listener"
        thread.start()
    }

    /// Makes the thread finish the sequence and exit soon (wakes it from poll).
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Returns once the thread has closed its connection and exited (after ``stop()``, soon; a connection
    /// being opened first waits out its `connect_timeout`). Only for a listener that was started.
    func waitUntilExited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let exited = exit.withLock { exit in
                if !exit.exited { exit.waiters.append(continuation) }
                return exit.exited
            }
            if exited { continuation.resume() }
        }
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    private func run() {
        defer { continuation.finish() }
        guard wakeRead >= 0 else {
            logger.error("Postgres listener could not create its wake-up pipe")
            return
        }
        var backoff: Duration = .milliseconds(100)
        while !isStopped {
            do {
                let handle = try CPostgresHandle.connect(parameters: parameters)
                defer { handle.finish() }
                for channel in channels {
                    try handle.simpleQuery("LISTEN \(try handle.quoteIdentifier(channel))")
                }
                logger.debug("Postgres listener is listening")
                continuation.yield(.listening)
                backoff = .milliseconds(100)
                try pump(handle)
            } catch {
                guard !isStopped else { break }
                logger.info(
                    "Postgres listener lost its connection; reconnecting",
                    metadata: [PostgresLoggingKeys.error: "\(error)"]
                )
                waitForStop(timeout: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    /// Reads notifications until stopped (returns) or the connection fails (throws).
    private func pump(_ handle: CPostgresHandle) throws(PostgresError) {
        // Notifications that arrived with the LISTEN results are already buffered in libpq.
        for notification in try handle.consumeNotifications() { continuation.yield(.notification(notification)) }
        while !isStopped {
            var descriptors = [
                pollfd(fd: handle.socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, 1000)
            if ready < 0 && errno != EINTR {
                throw PostgresError(code: .connectionClosed, message: "poll failed (errno \(errno))")
            }
            if isStopped { return }
            if ready > 0 && descriptors[0].revents != 0 {
                for notification in try handle.consumeNotifications() {
                    continuation.yield(.notification(notification))
                }
            }
        }
    }

    private func waitForStop(timeout: Duration) {
        var descriptor = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, Int32(timeout.milliseconds))
    }
}
