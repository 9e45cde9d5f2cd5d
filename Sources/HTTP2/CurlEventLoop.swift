import CCurl
import CShims
import Foundation
import Logging
import Synchronization

/// The thread that owns the `CURLM` multi handle and every easy handle of one ``HTTP2Client``.
///
/// libcurl handles must never be used from two threads, and its calls may block briefly, so a
/// dedicated `Thread` runs `curl_multi_perform` / `curl_multi_info_read` / `curl_multi_poll` in a
/// loop and nothing of libcurl runs on the Swift cooperative pool. Callers hand requests over
/// through ``Shared`` (a `Mutex`) and wake the loop with `curl_multi_wakeup`; the loop resumes
/// their continuations when transfers finish.
///
/// `@unchecked Sendable`: ``shared`` is the only state touched by other threads; the stored
/// properties below the `// Event-loop thread only` mark are touched by ``run()`` and the methods
/// it calls, which all run on the loop's thread.
final class CurlEventLoop: @unchecked Sendable {
    typealias Completion = CheckedContinuation<Result<HTTP2Response, HTTP2Error>, Never>

    enum SlotOutcome: Sendable {
        case acquired
        case failed(HTTP2Error)
    }

    private struct Shared {
        enum State { case running, draining, stopped }

        var state = State.running
        var submissions: [RequestContext] = []
        var cancellations: [RequestContext] = []
        /// A wakeup was sent since the loop last took the queues: no need to send another.
        var wakeupPending = false
        var inFlight = 0
        var slotWaiters = WaiterQueue()
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        var connectionsOpened = 0
        var requestsCompleted = 0
        var requestsFailed = 0
    }

    private let shared = Mutex(Shared())
    /// Requests handed to this loop and not yet answered, those waiting for a slot included: how
    /// ``HTTP2Client`` picks a loop, without taking the lock.
    private let assigned = Atomic<Int>(0)
    private let multi: CurlMultiHandle
    private let configuration: HTTP2Client.Configuration
    private let logger: Logger

    // Event-loop thread only.
    private var active: [ObjectIdentifier: RequestContext] = [:]
    private var freeHandles: [CurlEasyHandle] = []
    private var finished: [(Completion, Result<HTTP2Response, HTTP2Error>)] = []
    private var finishedConnects = 0

    init(configuration: HTTP2Client.Configuration, logger: Logger) throws(HTTP2Error) {
        try CurlGlobal.initialize()
        self.configuration = configuration
        self.logger = logger
        multi = try CurlMultiHandle()
        try multi.set(CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        try multi.set(CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        try multi.set(CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreamsPerConnection)
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "HTTP2Client"
        thread.start()
    }

    // MARK: Called from any thread

    var load: Int { assigned.load(ordering: .relaxed) }
    func assign() { assigned.wrappingAdd(1, ordering: .relaxed) }
    func unassign() { assigned.wrappingSubtract(1, ordering: .relaxed) }

    var statistics: HTTP2Client.Statistics {
        shared.withLock { shared in
            HTTP2Client.Statistics(
                connectionsOpened: shared.connectionsOpened,
                requestsCompleted: shared.requestsCompleted,
                requestsFailed: shared.requestsFailed,
                inFlight: shared.inFlight
            )
        }
    }

    /// Takes one of the `maxRequestsInFlight` slots, suspending (not spinning) while none is free.
    func acquireSlot(id: UInt64) async -> SlotOutcome {
        let limit = configuration.maxRequestsInFlight
        let immediate: SlotOutcome? = shared.withLock { shared in
            guard shared.state == .running else { return .failed(.shutdownError) }
            guard shared.inFlight < limit else { return nil }
            shared.inFlight += 1
            return .acquired
        }
        if let immediate { return immediate }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SlotOutcome, Never>) in
                let outcome: SlotOutcome? = shared.withLock { shared in
                    guard shared.state == .running else { return .failed(.shutdownError) }
                    if shared.inFlight < limit {
                        shared.inFlight += 1
                        return .acquired
                    }
                    // The cancellation handler may already have run (before we were queued).
                    if Task.isCancelled { return .failed(.cancelledError(mayHaveBeenSent: false)) }
                    shared.slotWaiters.append(id: id, continuation)
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            let waiter = shared.withLock { $0.slotWaiters.remove(id: id) }
            waiter?.resume(returning: .failed(.cancelledError(mayHaveBeenSent: false)))
        }
    }

    /// Gives back a slot taken by ``acquireSlot(id:)`` for a request that was never submitted.
    func releaseSlot() {
        let waiter = shared.withLock { shared in Self.releaseSlotLocked(&shared) }
        waiter?.resume(returning: .acquired)
    }

    /// Hands a request (holding a slot, with its continuation set) to the loop thread.
    func submit(_ context: RequestContext) {
        let rejection: (HTTP2Error, CheckedContinuation<SlotOutcome, Never>?)? = shared.withLock { shared in
            if shared.state == .stopped { return (.shutdownError, Self.releaseSlotLocked(&shared)) }
            if Task.isCancelled {
                return (.cancelledError(mayHaveBeenSent: false), Self.releaseSlotLocked(&shared))
            }
            shared.submissions.append(context)
            wakeLocked(&shared)
            return nil
        }
        if let (error, waiter) = rejection {
            context.continuation.take()?.resume(returning: .failure(error))
            waiter?.resume(returning: .acquired)
        }
    }

    /// Asks the loop to abort a submitted request; does nothing if it already finished.
    func cancel(_ context: RequestContext) {
        shared.withLock { shared in
            guard shared.state != .stopped else { return }
            shared.cancellations.append(context)
            wakeLocked(&shared)
        }
    }

    /// Stops taking requests, fails the requests waiting for a slot, lets the ones in flight finish
    /// (each is bounded by its timeout), then stops the thread and frees the curl handles.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (stopped, waiters) = shared.withLock { shared in
                let waiters = beginShutdownLocked(&shared)
                if shared.state == .stopped { return (true, waiters) }
                shared.shutdownWaiters.append(continuation)
                return (false, waiters)
            }
            for waiter in waiters { waiter.resume(returning: .failed(.shutdownError)) }
            if stopped { continuation.resume() }
        }
    }

    /// ``shutdown()`` without waiting, for `deinit`.
    func requestShutdown() {
        let waiters = shared.withLock { beginShutdownLocked(&$0) }
        for waiter in waiters { waiter.resume(returning: .failed(.shutdownError)) }
    }

    private func beginShutdownLocked(_ shared: inout Shared) -> [CheckedContinuation<SlotOutcome, Never>] {
        guard shared.state == .running else { return [] }
        shared.state = .draining
        wakeLocked(&shared)
        return shared.slotWaiters.removeAll()
    }

    private func wakeLocked(_ shared: inout Shared) {
        // Only while the loop runs: after `.stopped` the multi handle is gone.
        guard !shared.wakeupPending, shared.state != .stopped else { return }
        shared.wakeupPending = true
        multi.wakeup()
    }

    private static func releaseSlotLocked(_ shared: inout Shared) -> CheckedContinuation<SlotOutcome, Never>? {
        // A waiter takes the slot over; otherwise it becomes free.
        if let waiter = shared.slotWaiters.popFirst() { return waiter }
        shared.inFlight -= 1
        return nil
    }

    // MARK: Event-loop thread

    private func run() {
        logger.debug(
            "HTTP2 client event loop started",
            metadata: [
                HTTP2LoggingKeys.curlVersion: "\(CurlGlobal.version)",
                HTTP2LoggingKeys.maxConnectionsPerHost: "\(configuration.maxConnectionsPerHost)",
                HTTP2LoggingKeys.maxConcurrentStreams: "\(configuration.maxConcurrentStreamsPerConnection)",
            ]
        )
        var submissions: [RequestContext] = []
        var cancellations: [RequestContext] = []
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        while true {
            shared.withLock { shared in
                shared.wakeupPending = false
                swap(&submissions, &shared.submissions)
                swap(&cancellations, &shared.cancellations)
            }
            for context in submissions { start(context) }
            for context in cancellations { abort(context) }
            submissions.removeAll(keepingCapacity: true)
            cancellations.removeAll(keepingCapacity: true)

            var running: Int32 = 0
            let performResult =
                active.count > 1
                ? multi.corked { curl_multi_perform(multi.raw, &running) }
                : curl_multi_perform(multi.raw, &running)
            if performResult != CURLM_OK {
                logger.debug(
                    "curl_multi_perform failed",
                    metadata: [HTTP2LoggingKeys.curlCode: "\(performResult.rawValue)"]
                )
            }
            collectFinishedTransfers()

            if deliverFinished(stoppingInto: &shutdownWaiters) { break }
            _ = curl_multi_poll(multi.raw, nil, 0, 1000, nil)
        }
        freeHandles.removeAll()
        multi.cleanup()
        logger.debug("HTTP2 client event loop stopped")
        for waiter in shutdownWaiters { waiter.resume() }
    }

    private func start(_ context: RequestContext) {
        var easy: CurlEasyHandle? = nil
        do throws(HTTP2Error) {
            let handle: CurlEasyHandle
            if let free = freeHandles.popLast() { handle = free } else { handle = try CurlEasyHandle() }
            easy = handle
            try configure(handle, for: context)
            let added = curl_multi_add_handle(multi.raw, handle.raw)
            guard added == CURLM_OK else { throw HTTP2Error(multiCode: added, during: "curl_multi_add_handle") }
            context.easy = handle
            active[ObjectIdentifier(context)] = context
        } catch {
            if let easy { recycle(easy) }
            finish(context, .failure(error))
        }
    }

    private func configure(_ easy: CurlEasyHandle, for context: RequestContext) throws(HTTP2Error) {
        // A handle that served the same method keeps its options: only the request's own change.
        // Resetting and setting twenty options again cost a tenth of this thread's time.
        let shape = context.sendsBody ? context.method + " with a body" : context.method
        if easy.configuredShape != shape {
            if easy.configuredShape != nil { easy.reset() }
            try configureFixedOptions(easy, method: context.method)
            easy.configuredShape = shape
        }
        let contextPointer = Unmanaged.passUnretained(context).toOpaque()
        try easy.set(CURLOPT_PRIVATE, pointer: contextPointer)
        try easy.set(CURLOPT_HEADERDATA, pointer: contextPointer)
        try easy.set(CURLOPT_WRITEDATA, pointer: contextPointer)
        try easy.set(CURLOPT_URL, context.url)
        try easy.set(CURLOPT_TIMEOUT_MS, context.timeoutMilliseconds)
        try easy.set(CURLOPT_HTTPHEADER, slist: context.headerList.head)
        if context.sendsBody {
            try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, int64: Int64(context.bodyCount))
            try easy.set(CURLOPT_POSTFIELDS, pointer: context.body.baseAddress)
        }
    }

    /// The options every request of one method, with or without a body, shares.
    private func configureFixedOptions(_ easy: CurlEasyHandle, method: String) throws(HTTP2Error) {
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(easy.errorBuffer))
        try easy.set(CURLOPT_PROTOCOLS_STR, "https,http")
        try easy.set(CURLOPT_NOSIGNAL, true)
        try easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        try easy.set(CURLOPT_PIPEWAIT, true)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.milliseconds)
        try easy.set(CURLOPT_SSL_VERIFYPEER, configuration.verifyPeer)
        try easy.set(CURLOPT_SSL_VERIFYHOST, configuration.verifyHost ? 2 : 0)
        if let caFile = configuration.caFile { try easy.set(CURLOPT_CAINFO, caFile) }
        if let keepAlive = configuration.tcpKeepAliveInterval {
            let seconds = max(1, keepAlive.milliseconds / 1000)
            try easy.set(CURLOPT_TCP_KEEPALIVE, true)
            try easy.set(CURLOPT_TCP_KEEPIDLE, seconds)
            try easy.set(CURLOPT_TCP_KEEPINTVL, seconds)
        }
        try multi.track(easy)
        try easy.setHeaderFunction { buffer, size, count, userdata in
            let length = size * count
            guard let userdata else { return 0 }
            Unmanaged<RequestContext>.fromOpaque(userdata).takeUnretainedValue()
                .receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: length))
            return length
        }
        try easy.setWriteFunction { buffer, size, count, userdata in
            let length = size * count
            guard let userdata else { return 0 }
            Unmanaged<RequestContext>.fromOpaque(userdata).takeUnretainedValue()
                .receiveBody(UnsafeRawBufferPointer(start: buffer, count: length))
            return length
        }
        switch method {
        case "GET":
            try easy.set(CURLOPT_HTTPGET, true)
        case "HEAD":
            try easy.set(CURLOPT_NOBODY, true)
        case "POST":
            break
        default:
            try easy.set(CURLOPT_CUSTOMREQUEST, method)
        }
    }

    private func abort(_ context: RequestContext) {
        guard active.removeValue(forKey: ObjectIdentifier(context)) != nil, let easy = context.easy else { return }
        let mayHaveBeenSent = easy.info(int64: CURLINFO_PRETRANSFER_TIME_T) > 0
        _ = curl_multi_remove_handle(multi.raw, easy.raw)
        finishedConnects += easy.info(CURLINFO_NUM_CONNECTS)
        context.easy = nil
        recycle(easy)
        finish(context, .failure(.cancelledError(mayHaveBeenSent: mayHaveBeenSent)))
    }

    private func collectFinishedTransfers() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi.raw, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let raw = message.pointee.easy_handle else { continue }
            let result = CShims_curl_msg_result(message)
            var privatePointer: UnsafeMutableRawPointer? = nil
            _ = CShims_curl_easy_getinfo_ptr(raw, CURLINFO_PRIVATE, &privatePointer)
            guard let privatePointer else { continue }
            let context = Unmanaged<RequestContext>.fromOpaque(privatePointer).takeUnretainedValue()
            guard active.removeValue(forKey: ObjectIdentifier(context)) != nil, let easy = context.easy else {
                continue
            }
            complete(context, easy: easy, result: result)
        }
    }

    private func complete(_ context: RequestContext, easy: CurlEasyHandle, result: CURLcode) {
        finishedConnects += easy.info(CURLINFO_NUM_CONNECTS)
        let outcome: Result<HTTP2Response, HTTP2Error>
        if result == CURLE_OK {
            let version: HTTPVersion =
                switch easy.info(CURLINFO_HTTP_VERSION) {
                case Int(CURL_HTTP_VERSION_1_0): .http1_0
                case Int(CURL_HTTP_VERSION_2_0): .http2
                case Int(CURL_HTTP_VERSION_3): .http3
                default: .http1_1
                }
            outcome = .success(
                HTTP2Response(
                    status: easy.info(CURLINFO_RESPONSE_CODE),
                    headers: context.responseHeaders,
                    body: context.responseBody,
                    httpVersion: version
                )
            )
        } else {
            let mayHaveBeenSent = easy.info(int64: CURLINFO_PRETRANSFER_TIME_T) > 0
            outcome = .failure(
                HTTP2Error(curlCode: result, errorBuffer: easy.errorBuffer, mayHaveBeenSent: mayHaveBeenSent)
            )
        }
        _ = curl_multi_remove_handle(multi.raw, easy.raw)
        context.easy = nil
        recycle(easy)
        finish(context, outcome)
    }

    private func finish(_ context: RequestContext, _ outcome: Result<HTTP2Response, HTTP2Error>) {
        if logger.logLevel <= .debug, case .failure(let error) = outcome {
            logger.debug(
                "HTTP2 request failed",
                metadata: [
                    HTTP2LoggingKeys.requestID: "\(context.id)",
                    HTTP2LoggingKeys.errorCode: "\(error.code)",
                    HTTP2LoggingKeys.curlCode: "\(error.curlCode)",
                ]
            )
        }
        context.responseBody = []
        context.responseHeaders = []
        guard let continuation = context.continuation.take() else { return }
        finished.append((continuation, outcome))
    }

    private func recycle(_ easy: CurlEasyHandle) {
        // Options stay (see `configure`); the error text of this transfer does not.
        easy.errorBuffer[0] = 0
        if freeHandles.count < 1024 { freeHandles.append(easy) }
    }

    /// Updates the statistics, passes the freed slots on, resumes the callers, and tells whether
    /// the loop is done (shutting down, nothing queued or running).
    private func deliverFinished(stoppingInto shutdownWaiters: inout [CheckedContinuation<Void, Never>]) -> Bool {
        let count = finished.count
        var failed = 0
        for (_, outcome) in finished { if case .failure = outcome { failed += 1 } }
        let connects = finishedConnects
        finishedConnects = 0
        let idle = active.isEmpty
        var waiters: [CheckedContinuation<SlotOutcome, Never>] = []
        let stop = shared.withLock { shared in
            shared.connectionsOpened += connects
            shared.requestsCompleted += count - failed
            shared.requestsFailed += failed
            for _ in 0..<count {
                if let waiter = Self.releaseSlotLocked(&shared) { waiters.append(waiter) }
            }
            guard shared.state == .draining, idle, shared.submissions.isEmpty else { return false }
            shared.state = .stopped
            swap(&shutdownWaiters, &shared.shutdownWaiters)
            return true
        }
        for (continuation, outcome) in finished { continuation.resume(returning: outcome) }
        finished.removeAll(keepingCapacity: true)
        for waiter in waiters { waiter.resume(returning: .acquired) }
        return stop
    }
}

extension HTTP2Error {
    static var shutdownError: HTTP2Error {
        HTTP2Error(code: .shutdown, message: "the HTTP2 client is shut down", mayHaveBeenSent: false)
    }

    static func cancelledError(mayHaveBeenSent: Bool) -> HTTP2Error {
        HTTP2Error(code: .cancelled, message: "the request's task was cancelled", mayHaveBeenSent: mayHaveBeenSent)
    }
}

/// FIFO of tasks waiting for an in-flight slot; cancellation removes from the middle.
struct WaiterQueue {
    private var entries: [(id: UInt64, continuation: CheckedContinuation<CurlEventLoop.SlotOutcome, Never>)?] = []
    private var head = 0

    mutating func append(id: UInt64, _ continuation: CheckedContinuation<CurlEventLoop.SlotOutcome, Never>) {
        entries.append((id, continuation))
    }

    mutating func popFirst() -> CheckedContinuation<CurlEventLoop.SlotOutcome, Never>? {
        while head < entries.count {
            let entry = entries[head]
            entries[head] = nil
            head += 1
            if let entry {
                compactIfNeeded()
                return entry.continuation
            }
        }
        entries.removeAll(keepingCapacity: true)
        head = 0
        return nil
    }

    mutating func remove(id: UInt64) -> CheckedContinuation<CurlEventLoop.SlotOutcome, Never>? {
        for index in head..<entries.count where entries[index]?.id == id {
            let continuation = entries[index]?.continuation
            entries[index] = nil
            return continuation
        }
        return nil
    }

    mutating func removeAll() -> [CheckedContinuation<CurlEventLoop.SlotOutcome, Never>] {
        let all = entries[head...].compactMap { $0?.continuation }
        entries.removeAll()
        head = 0
        return all
    }

    private mutating func compactIfNeeded() {
        if head > 64, head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
