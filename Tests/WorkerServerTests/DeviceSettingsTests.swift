import APNsSimulator
import Foundation
import LiveDeliveryCore
import Postgres
import TestSupport
import Testing

@testable import LiveDelivery

/// `activity.settings` through the worker: filed per user and device (newest wins), applied to the user's
/// open orders, carried in the stored state, and counted by the report.
@Suite("The person's settings", .timeLimit(.minutes(6)))
struct DeviceSettingsTests {
    @Test(
        "Live Activities off on a device ends its activity without a push, a later report of on starts nothing by itself, and the report counts the person"
    )
    func activitiesOff() async throws {
        try await withWorker { harness, worker in
            let user = TestEnvironment.uniqueName("u")
            let device = TestEnvironment.uniqueName("iphone")
            let order = TestEnvironment.uniqueName("O")
            let token = Events.token()
            _ = try await worker.processor.process([
                Events.status(order, "preparing", sequence: 1, user: user),
                Events.deviceToken(order, activity: "act-" + order, token: token, device: device),
            ])
            try await drain(harness, worker)
            #expect(acceptedPushes(harness, token: token, event: "update").count == 1)

            _ = try await worker.processor.process([Events.settings(user: user, device: device, activities: false)])
            // An older report (on) arrives late: the newer one stands.
            _ = try await worker.processor.process([
                Events.settings(user: user, device: device, activities: true, at: "2026-11-21T10:04:30Z")
            ])
            _ = try await worker.processor.process([
                Events.status(order, "picked_up", sequence: 2, user: user, courier: "Sam")
            ])
            try await drain(harness, worker)
            #expect(harness.simulator.pushes(token: token).count == 1, "no end push and no update after it")
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "ended"
                ])
            #expect(
                try await harness.database.strings(
                    "SELECT activities_enabled::text FROM device_settings WHERE user_id = \(user)") == ["false"])
            for code in ["settings_reported", "activities_disabled", "settings_older"] {
                #expect(
                    try await harness.database.count(
                        "SELECT count(*) FROM timeline WHERE order_id = \(order) AND \(code) = ANY (codes)") == 1,
                    "\(code)")
            }
            #expect(
                try await harness.database.strings(
                    """
                    SELECT people::text FROM report_people_by_setting
                    WHERE NOT activities_enabled AND NOT frequent_pushes_enabled
                    """) == ["1"])
        }
    }

    @Test(
        "frequent updates on: the larger budget, kept in the stored state, sends at priority 10 what the standard budget sends at 5"
    )
    func frequentUpdates() async throws {
        try await withWorker(adjust: {
            $0.tracking.policy.priority10PerHour = 0
            $0.tracking.policy.frequentPriority10PerHour = 24
        }) { harness, worker in
            let user = TestEnvironment.uniqueName("u")
            var tokens: [String: String] = [:]
            for (device, frequent) in [("frequent", true), ("standard", false)] {
                let order = TestEnvironment.uniqueName("O-\(device)")
                let token = Events.token()
                tokens[device] = token
                _ = try await worker.processor.process([
                    Events.status(order, "preparing", sequence: 1, user: user),
                    Events.deviceToken(order, activity: "act-" + order, token: token, device: device + user),
                    Events.settings(user: user, device: device + user, frequent: frequent),
                ])
                // A new worker reads the state back from the database (no cache): the setting is stored in it.
                let reader = try harness.worker()
                _ = try await reader.processor.process([
                    Events.status(order, "out_for_delivery", sequence: 2, user: user, courier: "Sam")
                ])
                try await drain(harness, worker, reader)
                await reader.dispatcher.sender.shutdown()
                await reader.client.shutdown()
            }
            let frequent = try #require(acceptedPushes(harness, token: tokens["frequent"]!, event: "update").last)
            let standard = try #require(acceptedPushes(harness, token: tokens["standard"]!, event: "update").last)
            #expect(frequent.priority == 10)
            #expect(standard.priority == 5)
        }
    }
}
