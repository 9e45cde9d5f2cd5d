/// The pool's bookkeeping, without I/O: which connections are idle, how many exist, who waits.
///
/// Held in a `Mutex` by `PostgresClient`; every event returns the action the client must perform outside the
/// lock. Generic so that tests can drive it with plain values.
struct PostgresPoolStateMachine<Connection, Waiter> {
    enum LeaseAction {
        /// Use this idle connection.
        case use(Connection)
        /// Open a new connection (a slot is reserved for it).
        case open(id: Int)
        /// The pool is full; wait for a connection to come back.
        case wait
        case shutdown
    }

    typealias WaiterGrant = PostgresPoolGrant<Connection>

    enum ReleaseAction {
        case none
        /// Hand the connection (or a slot to open one) to this waiter.
        case grant(Waiter, WaiterGrant)
        /// Close this connection (broken, or the pool is shut down).
        case close(Connection)
        /// Close this broken connection and let the waiter open a new one.
        case closeAndGrant(Connection, Waiter, WaiterGrant)
    }

    let maximumConnections: Int
    private(set) var idle: [Connection] = []
    /// Open connections plus reserved slots being opened.
    private(set) var connectionCount = 0
    private(set) var waiters: [(id: Int, waiter: Waiter)] = []
    private(set) var isShutdown = false
    private var nextConnectionID = 1

    init(maximumConnections: Int) {
        self.maximumConnections = max(1, maximumConnections)
    }

    mutating func lease() -> LeaseAction {
        if isShutdown { return .shutdown }
        if let connection = idle.popLast() { return .use(connection) }
        if connectionCount < maximumConnections { return .open(id: reserveSlot()) }
        return .wait
    }

    /// Called (under the same lock) after `lease()` said `.wait`, once the waiter exists. The state may have
    /// changed in between, so this can grant at once.
    mutating func enqueue(_ waiter: Waiter, id: Int) -> LeaseAction {
        let action = lease()
        if case .wait = action { waiters.append((id, waiter)) }
        return action
    }

    /// A waiting task was cancelled; nil if it was already served.
    mutating func cancelWaiter(id: Int) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }

    /// A leased connection comes back; `reusable` is false when it is broken or in an unknown state.
    mutating func release(_ connection: Connection, reusable: Bool) -> ReleaseAction {
        if isShutdown || !reusable {
            connectionCount -= 1
            if !isShutdown, !waiters.isEmpty {
                let waiter = waiters.removeFirst().waiter
                return .closeAndGrant(connection, waiter, .open(id: reserveSlot()))
            }
            return .close(connection)
        }
        if !waiters.isEmpty { return .grant(waiters.removeFirst().waiter, .use(connection)) }
        idle.append(connection)
        return .none
    }

    /// Opening a connection for a reserved slot failed: free the slot, and let a waiter try in its turn.
    mutating func openFailed() -> (Waiter, WaiterGrant)? {
        connectionCount -= 1
        if !isShutdown, !waiters.isEmpty { return (waiters.removeFirst().waiter, .open(id: reserveSlot())) }
        return nil
    }

    /// Stops the pool: returns the idle connections to close and the waiters to fail.
    mutating func shutdown() -> (close: [Connection], fail: [Waiter]) {
        isShutdown = true
        let close = idle
        connectionCount -= idle.count
        idle = []
        let fail = waiters.map(\.waiter)
        waiters = []
        return (close, fail)
    }

    private mutating func reserveSlot() -> Int {
        connectionCount += 1
        defer { nextConnectionID += 1 }
        return nextConnectionID
    }
}

/// What a waiting task is given: a connection, or a slot to open one.
enum PostgresPoolGrant<Connection> {
    case use(Connection)
    case open(id: Int)
}
