public import Testing

/// `@Suite(.serialized, .exclusiveFaultServers)`: the suite runs with exclusive use of the fault
/// pair (see `TestEnvironment.withFaultServers`), so suites in different test targets that restart
/// the fault broker or database never overlap.
public struct ExclusiveFaultServers: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { false }

    public func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @concurrent @Sendable () async throws -> Void
    ) async throws {
        try await TestEnvironment.withFaultServers { try await function() }
    }
}

extension Trait where Self == ExclusiveFaultServers {
    public static var exclusiveFaultServers: Self { Self() }
}
