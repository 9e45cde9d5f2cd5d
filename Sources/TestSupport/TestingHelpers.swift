package import Testing

// Swift Testing helpers shared by the test targets: the fault-pair suite trait and `eventually`.

/// `@Suite(.serialized, .exclusiveFaultServers)`: the suite runs with exclusive use of the fault
/// pair (see `TestEnvironment.withFaultServers`), so suites in different test targets that restart
/// the fault broker or database never overlap.
package struct ExclusiveFaultServers: SuiteTrait, TestTrait, TestScoping {
    package var isRecursive: Bool { false }

    package func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @concurrent @Sendable () async throws -> Void
    ) async throws {
        try await TestEnvironment.withFaultServers { try await function() }
    }
}

extension Trait where Self == ExclusiveFaultServers {
    package static var exclusiveFaultServers: Self { Self() }
}

/// Waits for an observable condition (a row in the database, a push at the simulator): checks it,
/// with short pauses between, and records an issue and throws after `limit`. Waiting for a
/// condition, never for time: the pauses only pace the checks.
package func eventually(
    _ what: String, limit: Duration = .seconds(120), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting until \(what)", sourceLocation: sourceLocation)
    throw CancellationError()
}
