import ArgumentParser

struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Runs order events (JSON lines) through the policy and prints the pushes it would send."
    )

    func run() async throws {
        throw ValidationError("render is not implemented yet")
    }
}
