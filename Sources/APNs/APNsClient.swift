package import APNsModel
package import Foundation
package import HTTP2
package import Logging

/// Sends pushes to APNs (or apns-sim) for several apps at once, over a few long-lived HTTP/2 connections.
///
/// - One ``HTTP2Client`` (libcurl multi handle, its own connection pool) per base URL and provider team:
///   APNs refuses a connection that mixes developer accounts (`UnrelatedKeyIdInToken`).
/// - One provider token per key and team, shared by every connection and task, replaced every
///   ``APNsClientConfiguration/tokenRefreshInterval``.
/// - One request per send: a transport failure (timeout, reset, GOAWAY, dead connection) is returned as
///   ``APNsOutcome/retryLater(reason:status:after:)`` like APNs' own 429 and 5xx, and libcurl reconnects for
///   the next request. Whether and when to send again is the caller's decision alone (the worker's dispatcher,
///   with its attempts, backoff and APNs' `retry-after`).
/// - ``send(_:app:)`` never throws: every result is an ``APNsOutcome``.
package final class APNsClient: Sendable {
    /// Everything a push for one app needs, resolved once.
    private struct Target: Sendable {
        var app: APNsApp
        var client: HTTP2Client
        /// `<base URL>/3/device/`.
        var devicePath: String
        var tokenKey: String
        /// The client and `<broadcast URL>/4/broadcasts/apps/<bundle id>` of broadcasts.
        var broadcastClient: HTTP2Client
        var broadcastPath: String
        /// The client and `<channels URL>/1/apps/<bundle id>/channels` of channel management.
        var channelsClient: HTTP2Client
        var channelsPath: String
    }

    package let configuration: APNsClientConfiguration
    /// By bundle id.
    private let targets: [String: Target]
    /// One HTTP/2 client per `baseURL + " " + teamID`.
    private let routes: [String: HTTP2Client]
    private let tokens: APNsTokenProvider
    private let logger: Logger

    /// - Parameters:
    ///   - clock: measures token ages (tests pass a manual clock).
    ///   - wallClock: gives the tokens' `iat`.
    package init(
        configuration: APNsClientConfiguration,
        logger: Logger,
        clock: any Clock<Duration> = ContinuousClock(),
        wallClock: @escaping @Sendable () -> Date = { Date() }
    ) throws(APNsError) {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        self.tokens = APNsTokenProvider(
            refreshInterval: configuration.tokenRefreshInterval, clock: clock, wallClock: wallClock)
        var targets: [String: Target] = [:]
        var routes: [String: HTTP2Client] = [:]
        var transport = HTTP2Client.Configuration()
        transport.maxConnectionsPerHost = configuration.maxConnectionsPerHost
        transport.maxConcurrentStreamsPerConnection = configuration.maxConcurrentStreamsPerConnection
        // Each HTTP2Client here talks to one host: no more requests than its streams can carry, so
        // that none waits inside libcurl for a free stream, out of sight of the client's statistics;
        // the rest wait in the client's own queue, in order.
        transport.maxRequestsInFlight = min(
            configuration.maxRequestsInFlight,
            configuration.maxConnectionsPerHost * configuration.maxConcurrentStreamsPerConnection)
        transport.eventLoops = configuration.eventLoops
        transport.connectTimeout = configuration.connectTimeout
        transport.defaultRequestTimeout = configuration.requestTimeout
        transport.caFile = configuration.caFile
        transport.verifyPeer = configuration.verifyPeer
        transport.verifyHost = configuration.verifyHost
        func route(_ baseURL: String, teamID: String) throws(APNsError) -> HTTP2Client {
            let routeKey = Self.routeKey(baseURL: baseURL, teamID: teamID)
            if let existing = routes[routeKey] { return existing }
            do {
                let client = try HTTP2Client(configuration: transport, logger: logger)
                routes[routeKey] = client
                return client
            } catch {
                for client in routes.values { Task { await client.shutdown() } }
                throw APNsError(.transport, "cannot create the HTTP/2 client: \(error)")
            }
        }
        for app in configuration.apps {
            let baseURL = configuration.baseURL(for: app)
            let broadcastURL = configuration.broadcastURL(for: app)
            let channelsURL = configuration.channelsURL(for: app)
            targets[app.bundleID] = Target(
                app: app, client: try route(baseURL, teamID: app.teamID), devicePath: baseURL + "/3/device/",
                tokenKey: APNsTokenProvider.cacheKey(key: app.key, teamID: app.teamID),
                broadcastClient: try route(broadcastURL, teamID: app.teamID),
                broadcastPath: broadcastURL + "/4/broadcasts/apps/" + app.bundleID,
                channelsClient: try route(channelsURL, teamID: app.teamID),
                channelsPath: channelsURL + "/1/apps/" + app.bundleID + "/channels")
        }
        self.targets = targets
        self.routes = routes
    }

    private static func routeKey(baseURL: String, teamID: String) -> String { baseURL + " " + teamID }

    /// Connections opened so far, over all hosts and teams.
    package var connectionsOpened: Int { routes.values.reduce(0) { $0 + $1.statistics.connectionsOpened } }

    /// Provider tokens signed so far.
    package var providerTokensSigned: Int { get async { tokens.tokensMinted } }

    /// Sends one push for the app with this bundle id and tells what to do next (``send(_:app:)-(APNsRequest,_)``).
    package func send(_ notification: APNsNotification, app bundleID: String) async -> APNsOutcome {
        await send(notification.request, app: bundleID)
    }

    /// Sends one request for the app with this bundle id, as planned, and tells what to do next: a push to a
    /// device, a broadcast, or a channel's creation or deletion (iOS 18). Never throws; one request, never
    /// retried here. A creation's 201 is ``APNsOutcome/channelCreated(channelID:)``, `ChannelNotRegistered`
    /// is ``APNsOutcome/tokenGone(reason:unregisteredAt:)``.
    package func send(_ request: APNsRequest, app bundleID: String) async -> APNsOutcome {
        guard let target = targets[bundleID] else {
            return .configurationFault(reason: .unknownApp, status: nil)
        }
        // The push's metadata only when something will be logged: building it cost as much as
        // classifying the answer.
        var logger = self.logger
        if logger.logLevel <= .debug {
            logger[metadataKey: APNsLoggingKeys.apnsID] = "\(UUIDText.lowercased(request.requestID))"
            logger[metadataKey: APNsLoggingKeys.bundleID] = "\(bundleID)"
            if case .device(let token) = request.kind {
                logger[metadataKey: APNsLoggingKeys.tokenPrefix] = "\(token.prefix(8))"
            }
        }
        let (client, url, method): (HTTP2Client, String, String) =
            switch request.kind {
            case .device(let token): (target.client, target.devicePath + token, "POST")
            case .broadcast: (target.broadcastClient, target.broadcastPath, "POST")
            case .createChannel: (target.channelsClient, target.channelsPath, "POST")
            case .deleteChannel: (target.channelsClient, target.channelsPath, "DELETE")
            }
        return await exchange(target, client: client, logger: logger) { authorization in
            Self.http2Request(
                request, url: url, method: method, authorization: authorization,
                timeout: configuration.requestTimeout)
        } classify: { response in
            Self.classify(response, of: request, delays: configuration.retryDelays)
        }
    }

    /// The HTTP/2 request: the planned headers behind the provider token, and `content-type` with a body.
    package static func http2Request(
        _ request: APNsRequest, url: String, method: String = "POST", authorization: String, timeout: Duration
    ) -> HTTP2Request {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(request.headers.count + 2)
        headers.append(("authorization", authorization))
        for header in request.headers { headers.append((header.name, header.value)) }
        if !request.body.isEmpty { headers.append(("content-type", "application/json")) }
        return HTTP2Request(method: method, url: url, headers: headers, body: request.body, timeout: timeout)
    }

    /// What APNs' answer to the request says to do, read once from the response.
    static func classify(
        _ response: HTTP2Response, of request: APNsRequest, delays: APNsRetryDelays
    ) -> APNsOutcome {
        let retryAfter = response.header("retry-after").flatMap { Int($0) }.map { Duration.seconds($0) }
        switch (request.kind, response.status) {
        case (.device, _):
            return APNsOutcome.classify(
                status: response.status, body: response.body,
                apnsID: response.header("apns-id").flatMap(UUIDText.parse) ?? request.requestID,
                retryAfter: retryAfter, delays: delays)
        case (.createChannel, 200...299):
            guard let channelID = response.header("apns-channel-id"), !channelID.isEmpty else {
                return .payloadFault(reason: .unexpectedStatus, status: response.status)
            }
            return .channelCreated(channelID: channelID)
        case (_, 200...299):
            return .delivered(apnsID: request.requestID)
        default:
            return APNsOutcome.classify(
                status: response.status, body: response.body, apnsID: request.requestID, retryAfter: retryAfter,
                delays: delays)
        }
    }

    /// One request to APNs for an app, with the app's provider token: `make` builds it, `classify` reads the
    /// answer. A transport failure is an outcome, not retried here; an answer that says the token expired drops
    /// it from the cache, so that the next request signs a fresh one.
    private func exchange(
        _ target: Target, client: HTTP2Client, logger: Logger, make: (_ authorization: String) -> HTTP2Request,
        classify: (HTTP2Response) -> APNsOutcome
    ) async -> APNsOutcome {
        let app = target.app
        let token: APNsTokenProvider.Token
        do {
            token = try tokens.token(key: app.key, teamID: app.teamID, cacheKey: target.tokenKey)
        } catch {
            logger.debug("cannot sign a provider token", metadata: [APNsLoggingKeys.keyID: "\(app.key.keyID)"])
            return .configurationFault(reason: .signingFailed, status: nil)
        }
        do {
            let response = try await client.execute(make(token.authorization))
            let outcome = classify(response)
            if case .refreshAuth = outcome {
                tokens.invalidate(token: token.jwt, key: app.key, teamID: app.teamID)
            }
            logger.debug(
                "APNs answered",
                metadata: [
                    APNsLoggingKeys.status: "\(response.status)",
                    APNsLoggingKeys.reason: "\(outcome.reason?.rawValue ?? "")",
                ])
            return outcome
        } catch {
            let outcome = transportOutcome(error)
            logger.debug(
                "APNs request failed",
                metadata: [
                    APNsLoggingKeys.error: "\(error.code)",
                    APNsLoggingKeys.reason: "\(outcome.reason?.rawValue ?? "")",
                ])
            return outcome
        }
    }

    private func transportOutcome(_ error: HTTP2Error) -> APNsOutcome {
        let delay = configuration.retryDelays.transport
        switch error.code {
        case .timedOut: return .retryLater(reason: .timedOut, status: nil, after: delay)
        case .couldNotConnect: return .retryLater(reason: .couldNotConnect, status: nil, after: delay)
        case .http2, .sendFailed, .receiveFailed: return .retryLater(reason: .connectionLost, status: nil, after: delay)
        case .cancelled, .shutdown: return .retryLater(reason: .cancelled, status: nil, after: delay)
        case .tls:
            return error.isRetriable
                ? .retryLater(reason: .tlsFailure, status: nil, after: delay)
                : .configurationFault(reason: .tlsFailure, status: nil)
        default:
            return error.isRetriable
                ? .retryLater(reason: .transportFailure, status: nil, after: delay)
                : .configurationFault(reason: .transportFailure, status: nil)
        }
    }

    /// Closes every connection. Sends after this return a retry-later outcome.
    package func shutdown() async {
        for client in routes.values { await client.shutdown() }
    }
}
