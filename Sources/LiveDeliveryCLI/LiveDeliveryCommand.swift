import ArgumentParser
import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import LiveDeliveryCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `livedelivery` executable: a thin command line over the `LiveDelivery` library.
@main
struct LiveDeliveryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedelivery",
        abstract: "Keeps delivery Live Activities true: RabbitMQ order events → PostgreSQL → APNs.",
        discussion: """
            Exit status of the admin commands (report, dead-letters, failed-pushes, status): 0 success; \
            1 the operation failed (a dead letter or failed push not found, a replay not confirmed, an \
            SQL error); 2 the configuration is missing or invalid; 3 PostgreSQL or RabbitMQ could not be \
            reached (status still prints what it read from the database when only the broker is \
            unreachable). Every command exits 64 when the command line is wrong (an unknown option, a \
            failed validation: ArgumentParser's EX_USAGE). run, migrate, check-config, sweep and \
            publish exit 1 on any failure.
            """,
        version: LiveDeliveryVersion.description,
        subcommands: [
            RunCommand.self, MigrateCommand.self, CheckConfigCommand.self, PublishCommand.self, RenderCommand.self,
            ReportCommand.self, DeadLettersCommand.self, FailedPushesCommand.self, SweepCommand.self,
            StatusCommand.self, ValidateCommand.self,
        ]
    )
}

/// The exit statuses of the admin commands, defined once (the top-level --help and docs/reports.md
/// list them). Usage errors keep ArgumentParser's own status, 64 (`ExitCode.validationFailure`).
enum AdminExitCode {
    /// The operation failed: a publish not confirmed, a row not found, an SQL error.
    static let failure = ExitCode(1)
    /// The configuration is missing or invalid.
    static let invalidConfiguration = ExitCode(2)
    /// PostgreSQL or RabbitMQ could not be reached.
    static let unreachable = ExitCode(3)

    static func code(for failure: AdminFailure) -> ExitCode {
        switch failure {
        case .operation: Self.failure
        case .configuration: invalidConfiguration
        case .unreachable: unreachable
        }
    }
}

/// A progress line on stderr for long admin operations (`publish`, `dead-letters replay --all`),
/// redrawn in place with `\r` at most ten times a second, and only when stderr is a terminal: a
/// script or a log file gets nothing from it, only the command's one summary line on stdout.
final class ProgressLine: Sendable {
    private struct State {
        var lastDrawn: ContinuousClock.Instant?
        var drawn = false
        var done = 0
    }

    private let label: String
    private let enabled: Bool
    private let state = Mutex(State())
    private static let interval = Duration.milliseconds(100)

    init(label: String, enabled: Bool = isatty(STDERR_FILENO) == 1) {
        self.label = label
        self.enabled = enabled
    }

    /// Redraws the line unless it was drawn less than 0.1 s ago (the last call of a run is always
    /// drawn by ``finish()`` clearing it; the summary line says the total).
    func update(done: Int, total: Int) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let draw = state.withLock { state -> Bool in
            if let last = state.lastDrawn, now - last < Self.interval, done < total { return false }
            state.lastDrawn = now
            state.drawn = true
            return true
        }
        guard draw else { return }
        let percent = total > 0 ? done * 100 / total : 100
        // \u{1B}[K clears what a longer earlier line left on the right.
        FileHandle.standardError.write(Data("\r\(label): \(done)/\(total) (\(percent)%)\u{1B}[K".utf8))
    }

    /// Counts one more item done (for callers that see completions one by one) and redraws.
    func advance(total: Int) {
        guard enabled else { return }
        let done = state.withLock { state -> Int in
            state.done += 1
            return state.done
        }
        update(done: done, total: total)
    }

    /// Clears the line, so that the summary starts on a clean line.
    func finish() {
        guard enabled, state.withLock({ $0.drawn }) else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
