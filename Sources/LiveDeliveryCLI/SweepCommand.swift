import ArgumentParser
import LiveDelivery
import LiveDeliveryAdmin

/// `livedelivery sweep --once`: one sweep pass, then a summary of what it ended and why.
struct SweepCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sweep",
        abstract: "Runs one sweep pass (leaked activities: lifetime, idle, never adopted, end not accepted).",
        discussion: """
            `livedelivery run` sweeps continuously; this runs one pass now with the same configuration and \
            prints each activity it ended or gave up, and the count per reason. The end pushes it plans are \
            sent by the running workers.
            """)

    @OptionGroup var options: WorkerOptions

    @Flag(name: .long, help: "Run one pass and exit (required: the continuous sweeper runs inside `run`).")
    var once = false

    func run() async throws {
        guard once else {
            printError("sweep: pass --once (the continuous sweeper runs inside `livedelivery run`)")
            throw ExitCode(64)
        }
        do {
            let config = try await options.reader()
            let logger = options.logger(config: config)
            let summary = try await sweepOnce(config: config, logger: logger)
            for action in summary.actions {
                // The order id and the activity's key are a publisher's text.
                print(
                    "sweep: order \(TerminalText.printable(action.orderID)) "
                        + "activity \(TerminalText.printable(action.activityKey)): \(action.reason)")
            }
            let counts = summary.reasonCounts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            print(
                "sweep: \(summary.orders) order(s) due, \(summary.actions.count) action(s)"
                    + (counts.isEmpty ? "" : ": " + counts.joined(separator: " ")))
        } catch let error as LiveDeliveryError {
            printError(error.description)
            throw ExitCode(1)
        } catch let error as ExitCode {
            throw error
        } catch {
            printError("sweep: \(error)")
            throw ExitCode(1)
        }
    }
}
