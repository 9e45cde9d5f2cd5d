import APNsSimulator
import Foundation
import Testing

/// The control API is unauthenticated (reset, faults, full device tokens): it stays on loopback wherever the
/// APNs port listens, unless asked, and asking for another address is warned about.
@Suite("apns-sim's control API address", .timeLimit(.minutes(6)))
struct SimulatorControlHostTests {
    @Test("the control API stays on loopback when APNs listens on every interface")
    func controlStaysOnLoopback() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in configuration.host = "0.0.0.0" }
        #expect(fixture.simulator.controlURL.hasPrefix("http://127.0.0.1:"), "\(fixture.simulator.controlURL)")
        #expect(fixture.simulator.baseURL.hasPrefix("https://0.0.0.0:"))
        try await fixture.simulator.shutdown()
    }

    @Test(
        "an address other than loopback is warned about",
        arguments: [
            ("127.0.0.1", false), ("127.0.0.2", false), ("::1", false), ("localhost", false), ("0.0.0.0", true),
            ("10.0.0.5", true), ("127.evil.example", true), ("::", true),
        ])
    func warning(_ host: String, _ warned: Bool) {
        var configuration = SimulatorConfiguration()
        configuration.controlHost = host
        #expect((configuration.controlHostWarning != nil) == warned)
        #expect(configuration.controlHostWarning?.contains("unauthenticated") ?? true)
    }
}
