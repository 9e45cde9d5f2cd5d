import ArgumentParser

/// The `livedelivery` executable: a thin command line over the `LiveDelivery` library.
@main
struct LiveDeliveryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedelivery",
        abstract: "Keeps delivery Live Activities true: RabbitMQ order events → PostgreSQL → APNs.",
        subcommands: [
            RunCommand.self, MigrateCommand.self, CheckConfigCommand.self, PublishCommand.self, RenderCommand.self,
            ReportCommand.self, DeadLettersCommand.self, FailedPushesCommand.self, SweepCommand.self,
        ]
    )
}
