import CRabbitMQ
import CShims
import Foundation
import Logging

typealias PublishCompletion = @Sendable (Result<Void, RabbitMQError>) -> Void

/// A message to publish, as handed to the connection thread.
struct PublishRequest: Sendable {
    var exchange: String
    var routingKey: String
    var body: [UInt8]
    var properties: RabbitMQMessageProperties
    var mandatory: Bool
}

/// The single owner of one `amqp_connection_state_t`, confined to its dedicated thread.
///
/// The thread runs ``loop()``: drain the command queue (RPCs, acks, publishes, close), pump every
/// frame that is already available, then `poll()` the socket and the wake-up pipe with a timeout
/// of at most a quarter heartbeat. Pumping always goes through `amqp_simple_wait_frame_noblock`,
/// which is where rabbitmq-c sends heartbeats and notices a silent peer, so heartbeats are serviced
/// however long the application takes to process a delivery.
///
/// Channel 1.. are opened on demand: one for topology RPCs, one (in confirm mode) for publishing,
/// one per consumer. Channel numbers are never reused within a connection, so a delivery tag can
/// only ever be sent on the channel that issued it.
final class AMQPConnectionEngine {
    final class Consumer {
        let queue: String
        let tag: String
        let buffer: DeliveryBuffer
        /// False after `basic.cancel` (either side); deliveries can still be settled.
        var active = true

        init(queue: String, tag: String, buffer: DeliveryBuffer) {
            self.queue = queue
            self.tag = tag
            self.buffer = buffer
        }
    }

    private let mailbox: AMQPConnectionThread
    private let logger: Logger
    private let connection: amqp_connection_state_t
    /// False once the socket failed or the broker closed the connection: from then on only
    /// `amqp_destroy_connection` is called (channel/connection close would try to read and may crash).
    private var socketUsable = true
    private(set) var failure: RabbitMQError?
    private var nextChannel = 1
    private let channelMax: Int
    private var openChannels: Set<UInt16> = []
    private var rpcChannel: UInt16?
    private var publishChannel: UInt16?
    private var confirms = PublishConfirmTracker<PublishCompletion>()
    private var consumers: [UInt16: Consumer] = [:]
    private let pollTimeoutMS: Int32
    let heartbeatSeconds: Int

    // MARK: Thread entry, connect, loop, teardown

    static func run(mailbox: AMQPConnectionThread, onConnected: (Result<Void, RabbitMQError>) -> Void) {
        let engine: AMQPConnectionEngine
        do {
            engine = try AMQPConnectionEngine(mailbox: mailbox)
        } catch {
            mailbox.logger.debug("AMQP connect failed", metadata: [RabbitMQLoggingKeys.error: "\(error)"])
            mailbox.terminate(failure: error)
            onConnected(.failure(error))
            return
        }
        mailbox.connected(heartbeatSeconds: engine.heartbeatSeconds)
        onConnected(.success(()))
        engine.loop()
    }

    private init(mailbox: AMQPConnectionThread) throws(RabbitMQError) {
        guard let connection = amqp_new_connection() else {
            throw RabbitMQError(code: .resourceExhausted, context: "amqp_new_connection")
        }
        do {
            try Self.open(connection, mailbox.configuration)
        } catch {
            amqp_destroy_connection(connection)
            throw error
        }
        self.connection = connection
        self.mailbox = mailbox
        self.heartbeatSeconds = Int(amqp_get_heartbeat(connection))
        let channelMax = Int(amqp_get_channel_max(connection))
        self.channelMax = channelMax == 0 ? Int(UInt16.max) : channelMax
        self.pollTimeoutMS = heartbeatSeconds > 0 ? Int32(min(1000, max(10, heartbeatSeconds * 250))) : 1000
        var logger = mailbox.logger
        logger[metadataKey: RabbitMQLoggingKeys.heartbeat] = "\(heartbeatSeconds)"
        self.logger = logger
        logger.debug("AMQP connection open")
    }

    private static func open(
        _ connection: amqp_connection_state_t, _ configuration: AMQPConfiguration
    )
        throws(RabbitMQError)
    {
        let socket: OpaquePointer?
        if configuration.useTLS {
            socket = amqp_ssl_socket_new(connection)
            guard let socket else { throw RabbitMQError(code: .tlsFailed, context: "amqp_ssl_socket_new") }
            var status = amqp_ssl_socket_set_cacert(socket, configuration.caFile)
            guard status == AMQP_STATUS_OK.rawValue else { throw tlsError(status, "CA file") }
            if let certificate = configuration.clientCertificateFile, let key = configuration.clientKeyFile {
                status = amqp_ssl_socket_set_key(socket, certificate, key)
                guard status == AMQP_STATUS_OK.rawValue else { throw tlsError(status, "client certificate/key") }
            }
            amqp_ssl_socket_set_verify_peer(socket, configuration.verifyPeer ? 1 : 0)
            amqp_ssl_socket_set_verify_hostname(socket, configuration.verifyPeer ? 1 : 0)
            status = amqp_ssl_socket_set_ssl_versions(socket, AMQP_TLSv1_2, AMQP_TLSvLATEST)
            guard status == AMQP_STATUS_OK.rawValue else { throw tlsError(status, "TLS versions") }
        } else {
            socket = amqp_tcp_socket_new(connection)
            guard socket != nil else { throw RabbitMQError(code: .resourceExhausted, context: "amqp_tcp_socket_new") }
        }
        var timeout = configuration.connectTimeout.cTimeval
        let status = amqp_socket_open_noblock(socket, configuration.host, Int32(configuration.port), &timeout)
        guard status == AMQP_STATUS_OK.rawValue else {
            var error = RabbitMQError.library(status, context: "connect")
            if error.code != .tlsFailed { error.code = .connectFailed }
            throw error
        }
        _ = amqp_set_handshake_timeout(connection, &timeout)

        // consumer_cancel_notify: without it RabbitMQ never tells us that a consumer was cancelled
        // (queue deleted, …); rabbitmq-c merges this into its own capabilities.
        var clientProperties: [String: AMQPValue] = ["capabilities": ["consumer_cancel_notify": true]]
        if let name = configuration.connectionName { clientProperties["connection_name"] = .string(name) }
        let arena = CArena()
        var table = arena.table(clientProperties)
        let reply = CShims_amqp_login_plain(
            connection, configuration.vhost, Int32(configuration.channelMax), Int32(configuration.frameMax),
            configuration.heartbeatSeconds, &table, configuration.user, configuration.password)
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            var error = Self.closeError(reply.reply, context: "login")
            if error.replyCode == 403 { error.code = .authenticationFailed }
            throw error
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            throw RabbitMQError.library(reply.library_error, context: "login")
        default:
            throw RabbitMQError(code: .protocolError, context: "login")
        }
    }

    private static func tlsError(_ status: Int32, _ context: String) -> RabbitMQError {
        var error = RabbitMQError.library(status, context: context)
        error.code = .tlsFailed
        return error
    }

    private func loop() {
        var closeRequested = false
        while failure == nil {
            let taken = mailbox.takeCommands()
            for command in taken.commands {
                if let failure {
                    command.fail(AMQPConnectionThread.closedError(command, failure))
                } else {
                    command.run(self)
                }
            }
            if failure != nil { break }
            if taken.closeRequested {
                closeRequested = true
                break
            }
            amqp_maybe_release_buffers(connection)
            let moreFrames = pump(limit: 256)
            if failure != nil { break }
            if taken.commands.isEmpty, !moreFrames, amqp_frames_enqueued(connection) == 0,
                amqp_data_in_buffer(connection) == 0
            {
                mailbox.wait(socket: amqp_get_sockfd(connection), timeoutMS: pollTimeoutMS)
            }
        }
        teardown(graceful: closeRequested)
    }

    private func teardown(graceful: Bool) {
        if graceful, failure == nil, socketUsable {
            // connection.close closes every channel on the broker side (consumers, confirm channel).
            let reply = amqp_connection_close(connection, AMQP_REPLY_SUCCESS)
            if reply.reply_type != AMQP_RESPONSE_NORMAL { logger.debug("AMQP connection.close did not complete") }
        }
        let endError = failure
        for consumer in consumers.values {
            consumer.buffer.finish(throwing: endError)
        }
        consumers.removeAll()
        let closed = endError ?? RabbitMQError(code: .alreadyClosed, context: "connection closed before the confirm")
        for completion in confirms.removeAll() { completion(.failure(closed)) }
        amqp_destroy_connection(connection)
        if let endError {
            logger.debug("AMQP connection failed", metadata: [RabbitMQLoggingKeys.error: "\(endError)"])
        } else {
            logger.debug("AMQP connection closed")
        }
        mailbox.terminate(failure: endError)
    }

    /// Marks the connection as failed; the loop ends and tears down without further protocol traffic.
    private func fail(_ error: RabbitMQError) {
        socketUsable = false
        if failure == nil { failure = error }
    }

    // MARK: Frames

    /// Handles every frame that is already available. Returns true if it stopped at `limit`.
    private func pump(limit: Int) -> Bool {
        var frame = amqp_frame_t()
        // A tiny timeout rather than zero: rabbitmq-c only detects a missed heartbeat when its
        // receive deadline is earlier than the caller's deadline.
        var timeout = timeval(tv_sec: 0, tv_usec: 1)
        for _ in 0..<limit {
            let status = amqp_simple_wait_frame_noblock(connection, &frame, &timeout)
            if status == AMQP_STATUS_TIMEOUT.rawValue { return false }
            guard status == AMQP_STATUS_OK.rawValue else {
                fail(.library(status, context: "read"))
                return false
            }
            handle(frame)
            if failure != nil { return false }
        }
        return true
    }

    private func handle(_ frame: amqp_frame_t) {
        guard Int32(frame.frame_type) == AMQP_FRAME_METHOD else {
            logger.debug(
                "AMQP ignoring content frame outside a message",
                metadata: [RabbitMQLoggingKeys.channel: "\(frame.channel)"])
            return
        }
        let method = frame.payload.method
        let channel = frame.channel
        switch method.id {
        case CShims_amqp_BASIC_DELIVER:
            let deliver = method.decoded.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee
            let tag = deliver.delivery_tag
            let redelivered = deliver.redelivered != 0
            let exchange = String(amqpBytes: deliver.exchange)
            let routingKey = String(amqpBytes: deliver.routing_key)
            let consumerTag = String(amqpBytes: deliver.consumer_tag)
            guard let message = readMessage(channel: channel, context: "basic.deliver") else { return }
            let delivery = RabbitMQDelivery(
                body: message.body, deliveryTag: tag, redelivered: redelivered, exchange: exchange,
                routingKey: routingKey, consumerTag: consumerTag, properties: message.properties,
                acknowledger: AMQPAcknowledger(thread: mailbox, channel: channel))
            dispatch(delivery, channel: channel)
        case CShims_amqp_BASIC_RETURN:
            let returned = method.decoded.assumingMemoryBound(to: amqp_basic_return_t.self).pointee
            let key = PublishConfirmTracker<PublishCompletion>.ReturnKey(
                exchange: String(amqpBytes: returned.exchange), routingKey: String(amqpBytes: returned.routing_key),
                body: [])
            let replyCode = returned.reply_code
            let replyText = String(amqpBytes: returned.reply_text)
            guard let message = readMessage(channel: channel, context: "basic.return") else { return }
            var fullKey = key
            fullKey.body = message.body
            if channel != publishChannel || !confirms.markReturned(fullKey, replyCode: replyCode, replyText: replyText)
            {
                logger.debug("AMQP unmatched basic.return", metadata: [RabbitMQLoggingKeys.replyCode: "\(replyCode)"])
            }
        case CShims_amqp_BASIC_ACK, CShims_amqp_BASIC_NACK:
            let acked = method.id == CShims_amqp_BASIC_ACK
            let tag: UInt64
            let multiple: Bool
            if acked {
                let ack = method.decoded.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee
                (tag, multiple) = (ack.delivery_tag, ack.multiple != 0)
            } else {
                let nack = method.decoded.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee
                (tag, multiple) = (nack.delivery_tag, nack.multiple != 0)
            }
            guard channel == publishChannel else { return }
            for (completion, outcome) in confirms.settle(tag: tag, multiple: multiple, acked: acked) {
                switch outcome {
                case .confirmed:
                    completion(.success(()))
                case .nacked:
                    completion(.failure(RabbitMQError(code: .publishNacked, context: "basic.nack")))
                case .returned(let replyCode, let replyText):
                    completion(
                        .failure(
                            RabbitMQError(
                                code: .unroutable, replyCode: replyCode, replyText: replyText,
                                context: "basic.return")))
                }
            }
        case CShims_amqp_BASIC_CANCEL:
            guard let consumer = consumers[channel], consumer.active else { return }
            consumer.active = false
            logger.debug(
                "AMQP consumer cancelled by the broker",
                metadata: [
                    RabbitMQLoggingKeys.queue: "\(consumer.queue)", RabbitMQLoggingKeys.consumerTag: "\(consumer.tag)",
                ])
            consumer.buffer.finish(
                throwing: RabbitMQError(code: .consumerCancelled, context: "basic.cancel from the broker"))
        case CShims_amqp_CHANNEL_CLOSE, CShims_amqp_CONNECTION_CLOSE:
            handleClose(method, channel: channel, context: nil)
        case CShims_amqp_CONNECTION_BLOCKED, CShims_amqp_CONNECTION_UNBLOCKED:
            logger.debug(
                "AMQP connection flow control",
                metadata: ["amqp.blocked": "\(method.id == CShims_amqp_CONNECTION_BLOCKED)"])
        default:
            logger.debug("AMQP ignoring method", metadata: ["amqp.method": "\(method.id)"])
        }
    }

    /// Reads the header and body frames that follow `basic.deliver`/`basic.return`, copying them out.
    private func readMessage(
        channel: UInt16, context: String
    ) -> (properties: RabbitMQMessageProperties, body: [UInt8])? {
        var message = amqp_message_t()
        let reply = amqp_read_message(connection, channel, &message, 0)
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            let result = (RabbitMQMessageProperties(decoding: message.properties), [UInt8](amqpBytes: message.body))
            amqp_destroy_message(&message)
            return result
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            handleClose(reply.reply, channel: channel, context: context)
            return nil
        default:
            fail(.library(reply.library_error, context: context))
            return nil
        }
    }

    private func dispatch(_ delivery: RabbitMQDelivery, channel: UInt16) {
        if let consumer = consumers[channel], consumer.active, consumer.buffer.append(delivery) {
            return
        }
        // Nobody iterates any more (cancelled consumer): give the message back right away.
        let status = amqp_basic_nack(connection, channel, delivery.deliveryTag, 0, 1)
        if status != AMQP_STATUS_OK.rawValue { fail(.library(status, context: "basic.nack")) }
    }

    /// A `channel.close` or `connection.close` from the broker (as a frame or as an RPC reply).
    private func handleClose(_ method: amqp_method_t, channel: UInt16, context: String?) {
        let error = Self.closeError(method, context: context)
        if method.id == CShims_amqp_CHANNEL_CLOSE {
            var closeOK = amqp_channel_close_ok_t()
            let status = amqp_send_method(connection, channel, CShims_amqp_CHANNEL_CLOSE_OK, &closeOK)
            channelClosed(channel, error: error)
            if status != AMQP_STATUS_OK.rawValue { fail(.library(status, context: "channel.close-ok")) }
        } else {
            var closeOK = amqp_connection_close_ok_t()
            _ = amqp_send_method(connection, 0, CShims_amqp_CONNECTION_CLOSE_OK, &closeOK)
            fail(error)
        }
    }

    private func channelClosed(_ channel: UInt16, error: RabbitMQError) {
        logger.debug(
            "AMQP channel closed by the broker",
            metadata: [
                RabbitMQLoggingKeys.channel: "\(channel)", RabbitMQLoggingKeys.error: "\(error)",
            ])
        openChannels.remove(channel)
        if rpcChannel == channel { rpcChannel = nil }
        if publishChannel == channel {
            publishChannel = nil
            for completion in confirms.removeAll() { completion(.failure(error)) }
            confirms = PublishConfirmTracker()
        }
        if let consumer = consumers.removeValue(forKey: channel) { consumer.buffer.finish(throwing: error) }
    }

    private static func closeError(_ method: amqp_method_t, context: String?) -> RabbitMQError {
        switch method.id {
        case CShims_amqp_CONNECTION_CLOSE:
            let close = method.decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
            return RabbitMQError(
                code: .connectionClosed, replyCode: close.reply_code, replyText: String(amqpBytes: close.reply_text),
                context: context)
        case CShims_amqp_CHANNEL_CLOSE:
            let close = method.decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            return RabbitMQError(
                code: .channelClosed, replyCode: close.reply_code, replyText: String(amqpBytes: close.reply_text),
                context: context)
        default:
            return RabbitMQError(code: .protocolError, context: context ?? "unexpected method \(method.id)")
        }
    }

    // MARK: RPC plumbing

    /// Checks the reply of the last synchronous call on `channel`.
    private func checkReply(channel: UInt16, context: String) throws(RabbitMQError) {
        let reply = amqp_get_rpc_reply(connection)
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            handleClose(reply.reply, channel: channel, context: context)
            throw Self.closeError(reply.reply, context: context)
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            let error = RabbitMQError.library(reply.library_error, context: context)
            fail(error)
            throw error
        default:
            let error = RabbitMQError(code: .protocolError, context: context)
            fail(error)
            throw error
        }
    }

    private func openChannel() throws(RabbitMQError) -> UInt16 {
        guard nextChannel <= channelMax else {
            throw RabbitMQError(code: .resourceExhausted, context: "no channel numbers left on this connection")
        }
        let channel = UInt16(nextChannel)
        nextChannel += 1
        amqp_channel_open(connection, channel)
        try checkReply(channel: channel, context: "channel.open")
        openChannels.insert(channel)
        return channel
    }

    private func closeChannelQuietly(_ channel: UInt16) {
        guard openChannels.remove(channel) != nil, failure == nil, socketUsable else { return }
        let reply = amqp_channel_close(connection, channel, AMQP_REPLY_SUCCESS)
        if reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION {
            fail(.library(reply.library_error, context: "channel.close"))
        }
    }

    private func topologyChannel() throws(RabbitMQError) -> UInt16 {
        if let rpcChannel { return rpcChannel }
        let channel = try openChannel()
        rpcChannel = channel
        return channel
    }

    // MARK: Commands (run on the connection thread through AMQPConnectionThread.perform)

    func declareExchange(
        _ name: String, type: String, durable: Bool, autoDelete: Bool, internal: Bool, arguments: [String: AMQPValue]
    ) throws(RabbitMQError) {
        let channel = try topologyChannel()
        let arena = CArena()
        amqp_exchange_declare(
            connection, channel, arena.bytes(name), arena.bytes(type), 0, durable ? 1 : 0, autoDelete ? 1 : 0,
            `internal` ? 1 : 0, arena.table(arguments))
        try checkReply(channel: channel, context: "exchange.declare")
    }

    func deleteExchange(_ name: String, ifUnused: Bool) throws(RabbitMQError) {
        let channel = try topologyChannel()
        let arena = CArena()
        amqp_exchange_delete(connection, channel, arena.bytes(name), ifUnused ? 1 : 0)
        try checkReply(channel: channel, context: "exchange.delete")
    }

    func declareQueue(
        _ name: String, passive: Bool, durable: Bool, exclusive: Bool, autoDelete: Bool, arguments: [String: AMQPValue]
    ) throws(RabbitMQError) -> RabbitMQQueueInfo {
        let channel = try topologyChannel()
        let arena = CArena()
        let ok = amqp_queue_declare(
            connection, channel, arena.bytes(name), passive ? 1 : 0, durable ? 1 : 0, exclusive ? 1 : 0,
            autoDelete ? 1 : 0, arena.table(arguments))
        try checkReply(channel: channel, context: "queue.declare")
        guard let ok else { throw RabbitMQError(code: .protocolError, context: "queue.declare") }
        return RabbitMQQueueInfo(
            name: String(amqpBytes: ok.pointee.queue), messageCount: Int(ok.pointee.message_count),
            consumerCount: Int(ok.pointee.consumer_count))
    }

    func bindQueue(
        _ queue: String, exchange: String, routingKey: String, arguments: [String: AMQPValue], bind: Bool
    )
        throws(RabbitMQError)
    {
        let channel = try topologyChannel()
        let arena = CArena()
        if bind {
            amqp_queue_bind(
                connection, channel, arena.bytes(queue), arena.bytes(exchange), arena.bytes(routingKey),
                arena.table(arguments))
        } else {
            amqp_queue_unbind(
                connection, channel, arena.bytes(queue), arena.bytes(exchange), arena.bytes(routingKey),
                arena.table(arguments))
        }
        try checkReply(channel: channel, context: bind ? "queue.bind" : "queue.unbind")
    }

    /// `exchange.bind`: messages `source` routes with `routingKey` go on to `destination` too.
    func bindExchange(destination: String, source: String, routingKey: String) throws(RabbitMQError) {
        let channel = try topologyChannel()
        let arena = CArena()
        amqp_exchange_bind(
            connection, channel, arena.bytes(destination), arena.bytes(source), arena.bytes(routingKey),
            arena.table([:]))
        try checkReply(channel: channel, context: "exchange.bind")
    }

    func deleteQueue(_ name: String, ifUnused: Bool, ifEmpty: Bool) throws(RabbitMQError) -> Int {
        let channel = try topologyChannel()
        let arena = CArena()
        let ok = amqp_queue_delete(connection, channel, arena.bytes(name), ifUnused ? 1 : 0, ifEmpty ? 1 : 0)
        try checkReply(channel: channel, context: "queue.delete")
        return Int(ok?.pointee.message_count ?? 0)
    }

    func purgeQueue(_ name: String) throws(RabbitMQError) -> Int {
        let channel = try topologyChannel()
        let arena = CArena()
        let ok = amqp_queue_purge(connection, channel, arena.bytes(name))
        try checkReply(channel: channel, context: "queue.purge")
        return Int(ok?.pointee.message_count ?? 0)
    }

    /// Opens a channel, sets the per-consumer prefetch (global=0, before consuming, as quorum
    /// queues require) and starts a manual-ack consumer whose deliveries go to `buffer`.
    func consume(
        queue: String, prefetch: UInt16, consumerTag: String?, exclusive: Bool, arguments: [String: AMQPValue],
        buffer: DeliveryBuffer
    ) throws(RabbitMQError) -> (channel: UInt16, consumerTag: String) {
        let channel = try openChannel()
        do throws(RabbitMQError) {
            amqp_basic_qos(connection, channel, 0, prefetch, 0)
            try checkReply(channel: channel, context: "basic.qos")
            let arena = CArena()
            let ok = amqp_basic_consume(
                connection, channel, arena.bytes(queue), consumerTag.map { arena.bytes($0) } ?? amqp_empty_bytes, 0, 0,
                exclusive ? 1 : 0, arena.table(arguments))
            try checkReply(channel: channel, context: "basic.consume")
            guard let ok else { throw RabbitMQError(code: .protocolError, context: "basic.consume") }
            let tag = String(amqpBytes: ok.pointee.consumer_tag)
            consumers[channel] = Consumer(queue: queue, tag: tag, buffer: buffer)
            logger.debug(
                "AMQP consumer started",
                metadata: [
                    RabbitMQLoggingKeys.queue: "\(queue)", RabbitMQLoggingKeys.channel: "\(channel)",
                    RabbitMQLoggingKeys.consumerTag: "\(tag)",
                ])
            return (channel, tag)
        } catch {
            closeChannelQuietly(channel)
            throw error
        }
    }

    /// `basic.cancel` from the application; the stream ends after the buffered deliveries.
    func cancelConsumer(channel: UInt16) throws(RabbitMQError) {
        guard let consumer = consumers[channel], consumer.active else { return }
        let arena = CArena()
        amqp_basic_cancel(connection, channel, arena.bytes(consumer.tag))
        try checkReply(channel: channel, context: "basic.cancel")
        consumer.active = false
        consumer.buffer.finish()
    }

    /// `basic.cancel` for the consumer whose deliveries go to `buffer`, which nobody takes from any more.
    func cancelConsumer(of buffer: DeliveryBuffer) {
        guard let channel = consumers.first(where: { $0.value.buffer === buffer })?.key else { return }
        try? cancelConsumer(channel: channel)
    }

    func settle(channel: UInt16, tag: UInt64, _ settlement: AMQPSettlement) throws(RabbitMQError) {
        guard openChannels.contains(channel), consumers[channel] != nil else {
            throw RabbitMQError(code: .staleDelivery, context: "the channel that received the delivery is closed")
        }
        let status: Int32
        let context: String
        switch settlement {
        case .ack(let multiple):
            status = amqp_basic_ack(connection, channel, tag, multiple ? 1 : 0)
            context = "basic.ack"
        case .nack(let multiple, let requeue):
            status = amqp_basic_nack(connection, channel, tag, multiple ? 1 : 0, requeue ? 1 : 0)
            context = "basic.nack"
        case .reject(let requeue):
            status = amqp_basic_reject(connection, channel, tag, requeue ? 1 : 0)
            context = "basic.reject"
        }
        guard status == AMQP_STATUS_OK.rawValue else {
            let error = RabbitMQError.library(status, context: context)
            fail(error)
            throw error
        }
    }

    /// Puts the publishing channel in confirm mode (once per channel).
    func preparePublishing() throws(RabbitMQError) {
        if publishChannel != nil { return }
        let channel = try openChannel()
        amqp_confirm_select(connection, channel)
        try checkReply(channel: channel, context: "confirm.select")
        publishChannel = channel
        confirms = PublishConfirmTracker()
    }

    /// Sends a publish; `completion` runs when the broker confirms (or on failure).
    func publish(_ request: PublishRequest, completion: @escaping PublishCompletion) {
        let channel: UInt16
        do throws(RabbitMQError) {
            try preparePublishing()
            channel = publishChannel!
        } catch {
            completion(.failure(error))
            return
        }
        let arena = CArena()
        var properties = arena.properties(request.properties)
        let exchange = arena.bytes(request.exchange)
        let routingKey = arena.bytes(request.routingKey)
        let status = request.body.withUnsafeBytes { body in
            amqp_basic_publish(
                connection, channel, exchange, routingKey, request.mandatory ? 1 : 0, 0, &properties,
                amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress)))
        }
        guard status == AMQP_STATUS_OK.rawValue else {
            let error = RabbitMQError.library(status, context: "basic.publish")
            fail(error)
            completion(.failure(error))
            return
        }
        let returnKey =
            request.mandatory
            ? PublishConfirmTracker<PublishCompletion>.ReturnKey(
                exchange: request.exchange, routingKey: request.routingKey, body: request.body) : nil
        _ = confirms.register(completion, returnKey: returnKey)
    }
}

@available(*, unavailable)
extension AMQPConnectionEngine: Sendable {}
