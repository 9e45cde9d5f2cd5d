package import APNs
package import APNsModel
import Foundation
package import LiveDeliveryCore
package import Logging

/// Sends one planned push and classifies the answer (the seam between the dispatcher and APNs).
package protocol PushSending: Sendable {
    func send(_ push: PlannedPush) async -> APNsOutcome
    func shutdown() async
}

/// The production sender: one ``APNsClient`` per APNs environment, built from apns-apps.json.
package final class APNsPushSender: PushSending {
    private let clients: [String: APNsClient]

    package init(configuration: WorkerConfiguration.APNs, logger: Logger) throws(LiveDeliveryError) {
        var clients: [String: APNsClient] = [:]
        for environment in ["production", "sandbox"] {
            let apps = configuration.apps.filter { $0.environment == environment }
            guard !apps.isEmpty else { continue }
            var list: [APNsApp] = []
            for app in apps {
                let key: APNsSigningKey
                do {
                    key = try APNsSigningKey(keyID: app.keyID, p8File: app.keyFile)
                } catch {
                    throw LiveDeliveryError(.invalidConfiguration, "APNs key \(app.keyID): \(error.message)")
                }
                list.append(
                    APNsApp(
                        bundleID: app.bundleID, teamID: app.teamID, key: key,
                        environment: environment == "production" ? .production : .sandbox,
                        baseURL: configuration.baseURL, broadcastURL: configuration.broadcastURL,
                        channelsURL: configuration.channelsURL))
            }
            var clientConfiguration = APNsClientConfiguration(apps: list)
            clientConfiguration.caFile = configuration.caFile
            clientConfiguration.requestTimeout = configuration.requestTimeout
            clientConfiguration.eventLoops = configuration.eventLoops
            do {
                clients[environment] = try APNsClient(configuration: clientConfiguration, logger: logger)
            } catch {
                throw LiveDeliveryError(.apns, "cannot create the APNs client: \(error.message)")
            }
        }
        self.clients = clients
    }

    package func send(_ push: PlannedPush) async -> APNsOutcome {
        guard let client = clients[push.environment.rawValue] else {
            return .configurationFault(reason: .unknownApp, status: nil)
        }
        guard let request = Self.request(push) else {
            return .payloadFault(reason: .missingDeviceToken, status: 400)
        }
        return await client.send(request, app: push.bundleID)
    }

    /// The APNs request of a planned push, with the headers the core planned: to a device, or a broadcast
    /// channel's broadcast, creation or deletion; nil for a push to a device without a token.
    package static func request(_ push: PlannedPush) -> APNsRequest? {
        let kind: APNsRequest.Kind
        if push.isChannelRequest {
            kind =
                switch push.kind {
                case .openChannel: .createChannel
                case .closeChannel: .deleteChannel
                case .start, .update, .end: .broadcast
                }
        } else {
            guard let token = push.deviceToken else { return nil }
            kind = .device(token: token.hex)
        }
        return APNsRequest(
            kind: kind, headers: push.headers, body: push.payload, requestID: UUIDText.parse(push.apnsID) ?? UUID())
    }

    package func shutdown() async {
        for client in clients.values { await client.shutdown() }
    }
}
