import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Work for the connection thread. `run` executes on that thread with the engine; `fail` is called
/// instead when the connection is (or becomes) unusable before the command ran.
struct AMQPCommand: Sendable {
    let run: @Sendable (AMQPConnectionEngine) -> Void
    let fail: @Sendable (RabbitMQError) -> Void
    /// The error code used when the connection was already closed; `staleDelivery` for acks.
    let closedCode: RabbitMQError.Code
}

/// The thread-safe side of one AMQP connection: a lock-protected command queue, a wake-up pipe
/// that the connection thread polls together with the socket, and the close/termination state.
///
/// The rabbitmq-c connection itself lives on one dedicated thread inside ``AMQPConnectionEngine``
/// (rabbitmq-c is not thread-safe); every other thread only talks to it through ``perform``.
final class AMQPConnectionThread: Sendable {
    private struct State {
        var commands: [AMQPCommand] = []
        /// The thread is about to block in poll(); producers must write to the wake pipe.
        var sleeping = false
        var closeRequested = false
        var terminated = false
        /// Why the connection ended, when it failed rather than being closed by the application.
        var failure: RabbitMQError?
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    /// The heartbeat interval agreed with the broker, in seconds (0: off); set once connected.
    private let negotiatedHeartbeatSeconds = Atomic<Int>(0)
    private let wakeReadFD: Int32
    private let wakeWriteFD: Int32
    let configuration: AMQPConfiguration
    let logger: Logger

    private init(configuration: AMQPConfiguration, logger: Logger) throws(RabbitMQError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw RabbitMQError(code: .resourceExhausted, context: "pipe") }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeReadFD = fds[0]
        wakeWriteFD = fds[1]
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: RabbitMQLoggingKeys.host] = "\(configuration.host)"
        logger[metadataKey: RabbitMQLoggingKeys.port] = "\(configuration.port)"
        logger[metadataKey: RabbitMQLoggingKeys.vhost] = "\(configuration.vhost)"
        if let name = configuration.connectionName {
            logger[metadataKey: RabbitMQLoggingKeys.connectionName] = "\(name)"
        }
        self.logger = logger
    }

    /// Starts the thread, connects and logs in on it, then runs `setup` there before returning.
    static func start(
        configuration: AMQPConfiguration,
        logger: Logger,
        setup: @escaping @Sendable (AMQPConnectionEngine) throws(RabbitMQError) -> Void = { _ in }
    ) async throws(RabbitMQError) -> AMQPConnectionThread {
        let mailbox = try AMQPConnectionThread(configuration: configuration, logger: logger)
        let result: Result<Void, RabbitMQError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                AMQPConnectionEngine.run(mailbox: mailbox) { result in continuation.resume(returning: result) }
            }
            thread.name = "amqp \(configuration.connectionName ?? configuration.host)"
            thread.start()
        }
        try result.get()
        do {
            try await mailbox.perform(setup)
        } catch {
            await mailbox.close()
            throw error
        }
        return mailbox
    }

    /// Runs `body` on the connection thread and returns its result.
    func perform<T: Sendable>(
        ifClosed closedCode: RabbitMQError.Code = .alreadyClosed,
        _ body: @escaping @Sendable (AMQPConnectionEngine) throws(RabbitMQError) -> T
    ) async throws(RabbitMQError) -> T {
        let result: Result<T, RabbitMQError> = await withCheckedContinuation { continuation in
            enqueue(
                AMQPCommand(
                    run: { engine in
                        do throws(RabbitMQError) {
                            continuation.resume(returning: .success(try body(engine)))
                        } catch {
                            continuation.resume(returning: .failure(error))
                        }
                    },
                    fail: { continuation.resume(returning: .failure($0)) },
                    closedCode: closedCode
                )
            )
        }
        return try result.get()
    }

    /// Queues a command; fails it right away if the connection is closing or gone.
    func enqueue(_ command: AMQPCommand) {
        let rejection: RabbitMQError? = state.withLock { state in
            guard !state.terminated, !state.closeRequested else { return Self.closedError(command, state.failure) }
            state.commands.append(command)
            if state.sleeping {
                state.sleeping = false
                var byte: UInt8 = 1
                _ = write(wakeWriteFD, &byte, 1)  // under the lock: the fd is open while !terminated
            }
            return nil
        }
        if let rejection { command.fail(rejection) }
    }

    /// Asks the thread to close the connection gracefully and waits until it has ended.
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.terminated { return true }
                state.closeWaiters.append(continuation)
                if !state.closeRequested {
                    state.closeRequested = true
                    if state.sleeping {
                        state.sleeping = false
                        var byte: UInt8 = 1
                        _ = write(wakeWriteFD, &byte, 1)
                    }
                }
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Closes without waiting (used from `deinit` of the module's `package` types).
    func closeInBackground() {
        state.withLock { state in
            guard !state.terminated, !state.closeRequested else { return }
            state.closeRequested = true
            if state.sleeping {
                state.sleeping = false
                var byte: UInt8 = 1
                _ = write(wakeWriteFD, &byte, 1)
            }
        }
    }

    var isOpen: Bool { state.withLock { !$0.terminated && !$0.closeRequested } }

    var negotiatedHeartbeat: Duration { .seconds(negotiatedHeartbeatSeconds.load(ordering: .relaxed)) }

    func connected(heartbeatSeconds: Int) {
        negotiatedHeartbeatSeconds.store(heartbeatSeconds, ordering: .relaxed)
    }

    // MARK: Called on the connection thread only

    /// Takes the queued commands; when there are none, marks the thread as about to sleep.
    func takeCommands() -> (commands: [AMQPCommand], closeRequested: Bool) {
        state.withLock { state in
            let commands = state.commands
            state.commands.removeAll(keepingCapacity: true)
            if commands.isEmpty && !state.closeRequested { state.sleeping = true }
            return (commands, state.closeRequested)
        }
    }

    /// Blocks until the socket is readable, a command is queued, or `timeoutMS` passes.
    func wait(socket: Int32, timeoutMS: Int32) {
        var fds = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeReadFD, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&fds, 2, timeoutMS)
        if ready > 0, fds[1].revents != 0 {
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(wakeReadFD, &buffer, buffer.count) > 0 {}
        }
        state.withLock { $0.sleeping = false }
    }

    /// Marks the connection as ended, closes the pipe, fails queued commands and resumes `close()` callers.
    func terminate(failure: RabbitMQError?) {
        let (commands, waiters) = state.withLock { state in
            state.terminated = true
            state.failure = failure
            closeDescriptor(wakeReadFD)
            closeDescriptor(wakeWriteFD)
            let result = (state.commands, state.closeWaiters)
            state.commands = []
            state.closeWaiters = []
            return result
        }
        for command in commands { command.fail(Self.closedError(command, failure)) }
        for waiter in waiters { waiter.resume() }
    }

    /// The error for a command that cannot run because the connection ended.
    static func closedError(_ command: AMQPCommand, _ failure: RabbitMQError?) -> RabbitMQError {
        if command.closedCode == .staleDelivery {
            return RabbitMQError(code: .staleDelivery, context: "the connection that received the delivery is closed")
        }
        if let failure { return failure }
        return RabbitMQError(code: .alreadyClosed, context: "connection closed by the application")
    }
}

private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
