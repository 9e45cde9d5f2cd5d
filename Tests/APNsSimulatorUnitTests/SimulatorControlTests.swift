import APNsSimulator
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("apns-sim's control API and injected faults", .timeLimit(.minutes(6)))
struct SimulatorControlTests {
    func control(
        _ simulator: RunningSimulator,
        _ method: String,
        _ path: String,
        _ body: String? = nil
    ) async throws -> (status: Int, json: Any) {
        var request = URLRequest(url: URL(string: simulator.controlURL + path)!)
        request.httpMethod = method
        if let body { request.httpBody = Data(body.utf8) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return (
            (response as? HTTPURLResponse)?.statusCode ?? 0,
            try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)
        )
    }

    @Test func controlAPIMarksTokensInjectsFaultsListsAndResets() async throws {
        let fixture = try await SimulatorFixture.start()
        let simulator = fixture.simulator
        let connection = try await fixture.connect()
        let token = SimulatorFixture.token()
        let now = Int(Date().timeIntervalSince1970)
        func push() async throws -> H2TestConnection.Response {
            try await connection.send(
                path: "/3/device/\(token)", headers: try fixture.headers(),
                body: SimulatorFixture.payload(event: "update", timestamp: now))
        }

        #expect(try await control(simulator, "GET", "/healthz").status == 200)
        #expect(try await push().status == 200)

        // The phone rotates the activity's update token.
        let newToken = SimulatorFixture.token()
        #expect(try await control(simulator, "POST", "/tokens/\(token)/rotate", #"{"token":"abc"}"#).status == 400)
        #expect(
            try await control(simulator, "POST", "/tokens/\(newToken)/rotate", #"{"token":"\#(token)"}"#).status == 404)
        let rotated = try await control(simulator, "POST", "/tokens/\(token)/rotate", #"{"token":"\#(newToken)"}"#)
        #expect(rotated.status == 200)
        #expect((rotated.json as? [String: Any])?["updateToken"] as? String == newToken)

        // A fault for the next two requests.
        let fault = try await control(
            simulator, "POST", "/faults", #"{"status":503,"reason":"ServiceUnavailable","count":2}"#)
        #expect(fault.status == 200)
        #expect(try await push().reason == "ServiceUnavailable")
        #expect(try await push().status == 503)
        #expect(try await push().status == 200)

        // 100 percent until cleared.
        _ = try await control(simulator, "POST", "/faults", #"{"status":429,"reason":"TooManyRequests","percent":100}"#)
        #expect(try await push().status == 429)
        #expect(try await push().status == 429)
        _ = try await control(simulator, "DELETE", "/faults")
        #expect(try await push().status == 200)

        // Unregister with a given time.
        _ = try await control(simulator, "POST", "/tokens/\(token)/unregister", #"{"timestamp":1790000000000}"#)
        let gone = try await push()
        #expect(gone.status == 410)
        #expect(gone.timestamp == 1_790_000_000_000)

        let device = try await control(simulator, "GET", "/devices/\(token)")
        #expect(device.status == 200)
        #expect((device.json as? [String: Any])?["unregisteredAt"] != nil)
        let pushes = try #require(
            try await control(simulator, "GET", "/pushes?token=\(token)").json as? [[String: Any]])
        #expect(pushes.count == 8)
        #expect(pushes.map { $0["status"] as? Int } == [200, 503, 503, 200, 429, 429, 200, 410])
        let limited = try #require(
            try await control(simulator, "GET", "/pushes?token=\(token)&limit=2").json as? [[String: Any]])
        #expect(limited.map { $0["status"] as? Int } == [200, 410])
        #expect(try await control(simulator, "GET", "/devices/ffff").status == 404)
        #expect(try await control(simulator, "POST", "/faults", "not json").status == 400)

        _ = try await control(simulator, "POST", "/reset")
        let afterReset = try await control(simulator, "GET", "/pushes").json as? [Any]
        #expect(afterReset?.isEmpty == true)
        #expect(try await push().status == 200)  // no longer unregistered
        let stats = try #require(try await control(simulator, "GET", "/stats").json as? [String: Any])
        #expect(stats["requests"] as? Int == 9)  // counters survive a reset
        try await simulator.shutdown()
    }

    @Test func goawayDropAndStallFaults() async throws {
        let fixture = try await SimulatorFixture.start()
        let simulator = fixture.simulator
        let body = SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970))

        simulator.injectFault(FaultRule(goaway: true))
        let goawayConnection = try await fixture.connect()
        await #expect(throws: (any Error).self) {
            _ = try await goawayConnection.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body)
        }
        try await goawayConnection.closeFuture.get()
        let goaways = goawayConnection.goaways.withLockedValue { $0 }
        #expect(goaways == 1)
        #expect(simulator.statistics.goawaysSent == 1)

        simulator.injectFault(FaultRule(drop: true))
        let dropped = try await fixture.connect()
        await #expect(throws: (any Error).self) {
            _ = try await dropped.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body)
        }

        // A stalled request never answers; another stream on the same connection still does.
        let stalledToken = SimulatorFixture.token()
        simulator.injectFault(FaultRule(stall: true, token: stalledToken))
        let connection = try await fixture.connect()
        // Authenticate first: until then a connection carries one stream, which the stall would hold.
        #expect(
            try await connection.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body
            ).status == 200)
        let stalled = try await connection.start(
            path: "/3/device/\(stalledToken)", headers: try fixture.headers(), body: body)
        let other = try await connection.send(
            path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body)
        #expect(other.status == 200)
        #expect(simulator.pushes(token: stalledToken).first?.verdict.detail == "stalled")
        await connection.close()
        await #expect(throws: (any Error).self) { _ = try await stalled.get() }

        // Latency alone delays, then answers normally.
        simulator.injectFault(FaultRule(latencyMs: 50))
        let delayed = try await fixture.connect()
        #expect(
            try await delayed.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body
            ).status == 200)
        try await simulator.shutdown()
    }
}
