import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import Synchronization

/// One HTTP/2 stream: collects a request, applies injected faults, and answers as APNs would.
final class APNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let processor: RequestProcessor
    private let connection: ConnectionState
    private let maxConcurrentStreams: Int
    private var head = RequestHead()
    private var body: ByteBuffer?
    private var done = false

    init(processor: RequestProcessor, connection: ConnectionState, maxConcurrentStreams: Int) {
        self.processor = processor
        self.connection = connection
        self.maxConcurrentStreams = maxConcurrentStreams
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            if head.method.isEmpty {
                for (name, value, _) in headers.headers {
                    switch name {
                    case ":method": head.method = value
                    case ":path": head.path = value
                    case _ where name.hasPrefix(":"): break
                    default: head.headers.append((name, value))
                    }
                }
            }
            if headers.endStream { requestComplete(context: context) }
        case .data(let data):
            if case .byteBuffer(var buffer) = data.data {
                if body == nil {
                    body = buffer
                } else if body!.readableBytes <= RequestProcessor.maxCollectedBytes {
                    body!.writeBuffer(&buffer)
                }
            }
            if data.endStream { requestComplete(context: context) }
        default:
            break
        }
    }

    private func requestComplete(context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        processor.store.requests.wrappingAdd(1, ordering: .relaxed)
        let token = head.path.hasPrefix("/3/device/") ? String(head.path.dropFirst("/3/device/".count)) : ""
        guard
            let fault = processor.store.takeFault(
                token: token, kind: APNsRequestKind(path: head.path), channelID: head.value("apns-channel-id"))
        else {
            answer(context: context)
            return
        }
        if let latency = fault.latencyMs, latency > 0 {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(latency))) {
                let (handler, context) = loopBound.value
                handler.apply(fault, context: context)
            }
        } else {
            apply(fault, context: context)
        }
    }

    private func apply(_ fault: FaultRule, context: ChannelHandlerContext) {
        guard fault.interrupts else {
            answer(context: context)
            return
        }
        let streamID = Int(
            (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)).map { Int($0) } ?? 0)
        var record = processor.record(
            head: head, body: body ?? ByteBuffer(), connection: connection, streamID: streamID)
        if fault.drop == true {
            record.verdict = DeviceVerdict(.fault, "connection dropped")
            _ = processor.store.deliver(record, push: nil, bundleID: nil)
            context.channel.parent?.close(promise: nil)
        } else if fault.stall == true {
            record.verdict = DeviceVerdict(.fault, "stalled")
            _ = processor.store.deliver(record, push: nil, bundleID: nil)
        } else if fault.goaway == true {
            record.verdict = DeviceVerdict(.fault, "goaway")
            _ = processor.store.deliver(record, push: nil, bundleID: nil)
            processor.store.goawaysSent.wrappingAdd(1, ordering: .relaxed)
            let lastStreamID = HTTP2StreamID(max(0, streamID - 2))
            let reason = "{\"reason\":\"\(fault.reason ?? "Shutdown")\"}"
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(
                    lastStreamID: lastStreamID, errorCode: .noError, opaqueData: ByteBuffer(string: reason)))
            if let parent = context.channel.parent {
                parent.writeAndFlush(frame).whenComplete { _ in
                    parent.eventLoop.scheduleTask(in: .milliseconds(200)) { parent.close(promise: nil) }
                }
            }
        } else if let status = fault.status {
            record.status = status
            record.reason = fault.reason
            record.verdict = DeviceVerdict(.fault, "injected \(status)")
            if status == 410 { record.unregisteredAt = processor.store.now() }
            let stored = processor.store.deliver(record, push: nil, bundleID: nil)
            respond(
                context: context,
                APNsAnswer(
                    status: status, reason: fault.reason, apnsID: stored.apnsID,
                    unregisteredAt: stored.unregisteredAt, retryAfter: fault.retryAfter,
                    idHeader: stored.kind.idHeader))
        }
    }

    private func answer(context: ChannelHandlerContext) {
        let streamID = Int(
            (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)).map { Int($0) } ?? 0)
        let answer = processor.process(
            head: head, body: body ?? ByteBuffer(), connection: connection, streamID: streamID)
        if answer.becameAuthenticated, maxConcurrentStreams > 0, let parent = context.channel.parent {
            let settings = HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(
                    .settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams)])))
            parent.writeAndFlush(settings, promise: nil)
        }
        respond(context: context, answer)
    }

    private func respond(context: ChannelHandlerContext, _ answer: APNsAnswer) {
        var headers = HPACKHeaders([(":status", String(answer.status)), (answer.idHeader, answer.apnsID)])
        if let channelID = answer.channelID { headers.add(name: "apns-channel-id", value: channelID) }
        let body: String
        if (200..<300).contains(answer.status) {
            guard let success = answer.body else {
                context.writeAndFlush(wrapOutboundOut(.headers(.init(headers: headers, endStream: true))), promise: nil)
                return
            }
            body = success
        } else {
            var error = "{\"reason\":\"\(answer.reason ?? "")\""
            if let date = answer.unregisteredAt {
                error += ",\"timestamp\":\(Int64((date.timeIntervalSince1970 * 1000).rounded()))"
            }
            body = error + "}"
        }
        if let retryAfter = answer.retryAfter { headers.add(name: "retry-after", value: String(retryAfter)) }
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(body.utf8.count))
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
        context.writeAndFlush(
            wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: body)), endStream: true))), promise: nil)
    }
}

/// Counts a connection as open until it closes.
final class ConnectionCountingHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny
    let store: SimulatorStore

    init(store: SimulatorStore) { self.store = store }

    func channelActive(context: ChannelHandlerContext) {
        store.connectionsAccepted.wrappingAdd(1, ordering: .relaxed)
        store.connectionsOpen.wrappingAdd(1, ordering: .relaxed)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        store.connectionsOpen.wrappingSubtract(1, ordering: .relaxed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
