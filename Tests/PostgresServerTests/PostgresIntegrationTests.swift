import Foundation
import Glibc
import TestSupport
import Testing

@testable import Postgres

@Suite(.timeLimit(.minutes(6)))
struct PostgresIntegrationTests {
    @Test func textRoundTrips() async throws {
        let values = [
            "", "plain", "héllo 🌍 日本語", "it's \"quoted\"", #"back\slash \x00 \\"#, "semi; -- comment", "\n\t",
        ]
        try await PostgresTestSupport.withClient { client in
            for value in values {
                let rows = try await client.query("SELECT \(value)::text AS v, length(\(value)) AS n")
                #expect(try rows[0].decode(String.self, "v") == value)
                #expect(try rows[0].decode(Int.self, "n") == value.count)
            }
        }
    }

    @Test func numbersAndBoolsRoundTrip() async throws {
        try await PostgresTestSupport.withClient { client in
            let row = try await client.query(
                """
                SELECT \(Int64.min) AS min, \(Int64.max) AS max, \(Int32.min) AS i32, \(0) AS zero,
                       \(0.1) AS tenth, \(-1e300) AS big, \(Double.infinity) AS inf, \(Double.nan) AS nan,
                       \(Double.leastNonzeroMagnitude) AS tiny, \(true) AS yes, \(false) AS no
                """
            )[0]
            #expect(try row.decode(Int64.self, "min") == .min)
            #expect(try row.decode(Int64.self, "max") == .max)
            #expect(try row.decode(Int32.self, "i32") == .min)
            #expect(try row.decode(Int.self, "zero") == 0)
            #expect(try row.decode(Double.self, "tenth") == 0.1)
            #expect(try row.decode(Double.self, "big") == -1e300)
            #expect(try row.decode(Double.self, "inf") == .infinity)
            #expect(try row.decode(Double.self, "nan").isNaN)
            #expect(try row.decode(Double.self, "tiny") == .leastNonzeroMagnitude)
            #expect(try row.decode(Bool.self, "yes") == true)
            #expect(try row.decode(Bool.self, at: 10) == false)
        }
    }

    @Test func timestampsKeepMicrosecondsAndTimeZones() async throws {
        let dates = [
            Date(timeIntervalSince1970: 1_700_000_000.123456),
            Date(timeIntervalSince1970: -86_400.5),
            Date(timeIntervalSince1970: 4_102_444_800.000001),
        ]
        try await PostgresTestSupport.withClient { client in
            for date in dates {
                let row = try await client.query("SELECT \(date) AS t, extract(microseconds FROM \(date))::int AS us")[
                    0]
                let decoded = try row.decode(Date.self, "t")
                #expect(abs(decoded.timeIntervalSince(date)) < 0.000_001)
                #expect(PostgresTimestamp.format(decoded) == PostgresTimestamp.format(date))
            }
            // A literal in another zone comes back as the same instant.
            let row = try await client.query(
                "SELECT '2024-03-10 17:30:00.25+05:30'::timestamptz AS t, '2024-03-10 12:00:00.25'::timestamp AS naive"
            )[0]
            let expected = Date(timeIntervalSince1970: 1_710_072_000.25)
            #expect(try row.decode(Date.self, "t") == expected)
            #expect(try row.decode(Date.self, "naive") == expected)
        }
    }

    @Test func jsonByteaUUIDArraysAndNullRoundTrip() async throws {
        struct Payload: Codable, Equatable {
            var name: String
            var count: Int
        }
        let table = PostgresTestSupport.tableName("pg_values")
        let payload = Payload(name: "Zoë \"q\"", count: 3)
        let bytes = (0...255).map(UInt8.init)
        let uuid = UUID()
        try await PostgresTestSupport.withClient { client in
            try await client.withConnection { connection in
                try await connection.execute(
                    unsafeSQL: """
                        CREATE TEMP TABLE \(table) (id int PRIMARY KEY, doc jsonb, data bytea, ref uuid, note text);
                        """
                )
                try await connection.query(
                    """
                    INSERT INTO \(unsafeRaw: table) VALUES
                        (1, \(try PostgresJSON(payload))::jsonb, \(bytes), \(uuid), \("note")),
                        (2, NULL, \([UInt8]()), \(nil as UUID?), \(nil as String?))
                    """
                )
                let rows = try await connection.query(
                    "SELECT id, doc, doc->>'name' AS name, data, ref, note FROM \(unsafeRaw: table) ORDER BY id"
                )
                #expect(rows.count == 2)
                #expect(try rows[0].decode(PostgresJSON.self, "doc").decode(Payload.self) == payload)
                #expect(try rows[0].decode(String.self, "name") == payload.name)
                #expect(try rows[0].decode([UInt8].self, "data") == bytes)
                #expect(try rows[0].decode(UUID.self, "ref") == uuid)
                #expect(try rows[1].decode(PostgresJSON?.self, "doc") == nil)
                #expect(try rows[1].decode([UInt8].self, "data") == [])
                #expect(try rows[1].decode(UUID?.self, "ref") == nil)
                #expect(try rows[1].decode(String?.self, "note") == nil)
                #expect(rows.columns.map(\.name) == ["id", "doc", "name", "data", "ref", "note"])
                #expect(rows.columns[4].dataType == .uuid)

                let strange = ["a,b", "c\"d", "{e}", #"back\slash"#, "NULL", ""]
                let arrays = try await connection.query(
                    """
                    SELECT \(strange) = ARRAY['a,b', 'c"d', '{e}', 'back\\slash', 'NULL', '']::text[] AS same,
                           (SELECT count(*) FROM \(unsafeRaw: table) WHERE id = ANY(\([1, 2, 99]))) AS ids,
                           (SELECT count(*) FROM \(unsafeRaw: table) WHERE note = ANY(\(["note", "other"]))) AS notes,
                           (SELECT count(*) FROM \(unsafeRaw: table) WHERE ref = ANY(\([uuid]))) AS refs
                    """
                )
                #expect(try arrays[0].decode(Bool.self, "same"))
                #expect(try arrays[0].decode(Int.self, "ids") == 2)
                #expect(try arrays[0].decode(Int.self, "notes") == 1)
                #expect(try arrays[0].decode(Int.self, "refs") == 1)
            }
        }
    }

    /// A result in binary format: `bytea` as its bytes, text, integers and `bool` decoded as from text, NULLs as
    /// NULL, in a statement of its own and in a pipeline beside a text one; another type is refused by name.
    @Test func binaryResultsDecodeAsText() async throws {
        let bytes = (0...255).map(UInt8.init) + Array("{\"x\": 1}".utf8)
        let query: PostgresQuery = """
            SELECT \(bytes)::bytea AS data, 'héllo ✓'::text AS label, \(Int64.min)::bigint AS min,
                   \(Int32.max)::int4 AS i32, (-7)::int2 AS i16, 4294967295::oid AS big, true AS yes, false AS no,
                   NULL::bytea AS none, NULL::bigint AS nothing, ''::bytea AS empty, now() AS at
            """
        func check(_ row: PostgresRow) throws {
            #expect(try row.decode([UInt8].self, "data") == bytes)
            #expect(try row.decode(String.self, "label") == "héllo ✓")
            #expect(try row.decode(Int64.self, "min") == .min)
            #expect(try row.decode(Int32.self, "i32") == .max)
            #expect(try row.decode(Int16.self, "i16") == -7)
            #expect(try row.decode(Int64.self, "big") == 4_294_967_295)
            #expect(try row.decode(Bool.self, "yes"))
            #expect(try !row.decode(Bool.self, "no"))
            #expect(try row.decode([UInt8]?.self, "none") == nil)
            #expect(try row.decode(Int64?.self, "nothing") == nil)
            #expect(try row.decode([UInt8].self, "empty") == [])
            let refused = #expect(throws: PostgresError.self) { try row.decode(Date.self, "at") }
            #expect(refused?.message?.contains("binary format") == true)
            #expect(refused?.columnName == "at")
        }
        try await PostgresTestSupport.withClient { client in
            try check(try await client.query(query.results(.binary))[0])
            try await client.withConnection { connection in
                let results = try await connection.pipeline([
                    query.results(.binary), "SELECT \(bytes)::bytea AS data", query.results(.binary),
                ])
                try check(results[0][0])
                #expect(try results[1][0].decode([UInt8].self, "data") == bytes)
                #expect(results[1][0].cell(at: 0).text?.hasPrefix("\\x") == true)
                try check(results[2][0])
            }
        }
    }

    @Test func decodingErrorsNameTheColumn() async throws {
        try await PostgresTestSupport.withClient { client in
            let row = try await client.query("SELECT 'abc'::text AS label, NULL::int AS missing")[0]
            let wrongType = #expect(throws: PostgresError.self) { try row.decode(Int.self, "label") }
            #expect(wrongType?.code == .decoding)
            #expect(wrongType?.columnName == "label")
            #expect(wrongType?.description.contains("abc") == false)
            let null = #expect(throws: PostgresError.self) { try row.decode(Int.self, "missing") }
            #expect(null?.message?.contains("NULL") == true)
            #expect(try row.decode(Int?.self, "missing") == nil)
            #expect(throws: PostgresError.self) { try row.decode(Int.self, "nonexistent") }
        }
    }

    @Test func uniqueViolationCarriesSQLStateAndConstraint() async throws {
        let table = PostgresTestSupport.tableName("pg_unique")
        try await PostgresTestSupport.withClient { client in
            try await client.withConnection { connection in
                try await connection.execute(
                    unsafeSQL: "CREATE TEMP TABLE \(table) (email text CONSTRAINT \(table)_email_key UNIQUE)"
                )
                try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\("secret@example.com"))")
                let error = await #expect(throws: PostgresError.self) {
                    try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\("secret@example.com"))")
                }
                #expect(error?.code == .server)
                #expect(error?.sqlState == .uniqueViolation)
                #expect(error?.constraintName == "\(table)_email_key")
                #expect(error?.tableName == table)
                #expect(error?.isRetriable == false)
                #expect(error?.description.contains("secret@example.com") == false)
                #expect(error?.detail?.contains("secret@example.com") == true)
                // The connection stays usable after a statement error.
                #expect(
                    try await connection.query("SELECT count(*) AS n FROM \(unsafeRaw: table)")[0].decode(Int.self, "n")
                        == 1)
            }
        }
    }

    @Test func transactionsCommitAndRollBack() async throws {
        let table = PostgresTestSupport.tableName("pg_tx")
        try await PostgresTestSupport.withClient { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id int PRIMARY KEY)"))
            await #expect(throws: ExpectedFailure.self) {
                try await client.withTransaction { connection in
                    try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(1))")
                    throw ExpectedFailure()
                }
            }
            try await client.withTransaction(isolation: .serializable) { connection in
                try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(2))")
            }
            // A statement that failed inside, with its error swallowed, makes COMMIT fail loudly.
            let swallowed = await #expect(throws: PostgresError.self) {
                try await client.withTransaction { connection in
                    try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(3))")
                    _ = try? await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(2))")
                }
            }
            #expect(swallowed?.sqlState == .inFailedSQLTransaction)
            // A withConnection body that leaves a transaction open is rolled back before reuse.
            try await client.withConnection { connection in
                try await connection.execute(unsafeSQL: "BEGIN")
                try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(4))")
            }
            let ids = try await client.query("SELECT id FROM \(unsafeRaw: table) ORDER BY id").map {
                try $0.decode(Int.self, "id")
            }
            #expect(ids == [2])
            try await client.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"))
        }
    }

    @Test("a transaction's BEGIN goes out with its first statement, whichever kind that is")
    func beginRidesWithTheFirstStatement() async throws {
        let table = PostgresTestSupport.tableName("pg_begin")
        try await PostgresTestSupport.withClient { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id int PRIMARY KEY)"))
            // First a single statement: the isolation level applies, and the next statement is in the same
            // transaction (outside one, each statement would have its own id).
            try await client.withTransaction(isolation: .serializable) { connection in
                let first = try await connection.query(
                    "SELECT current_setting('transaction_isolation') AS level, txid_current() AS id")
                #expect(try first[0].decode(String.self, "level") == "serializable")
                let again = try await connection.query("SELECT txid_current() AS id")
                #expect(try again[0].decode(Int64.self, "id") == first[0].decode(Int64.self, "id"))
            }
            // First a pipeline: one result per statement of the caller's (BEGIN's is not among them).
            try await client.withTransaction(isolation: .repeatableRead) { connection in
                let results = try await connection.pipeline([
                    "SELECT current_setting('transaction_isolation') AS level",
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(1))",
                ])
                #expect(results.count == 2)
                #expect(try results[0][0].decode(String.self, "level") == "repeatable read")
            }
            // First multi-statement SQL text, then the body throws: all of it is rolled back.
            await #expect(throws: ExpectedFailure.self) {
                try await client.withTransaction { connection in
                    try await connection.execute(
                        unsafeSQL: "INSERT INTO \(table) VALUES (10); INSERT INTO \(table) VALUES (11)")
                    throw ExpectedFailure()
                }
            }
            // The first statement fails: its own error, nothing kept, and the connection goes on.
            let failed = await #expect(throws: PostgresError.self) {
                try await client.withTransaction { connection in
                    try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(1))")
                }
            }
            #expect(failed?.sqlState == .uniqueViolation)
            // A body that sends nothing, and one that throws before sending anything.
            try await client.withTransaction { _ in }
            await #expect(throws: ExpectedFailure.self) {
                try await client.withTransaction { _ in throw ExpectedFailure() }
            }
            let ids = try await client.query("SELECT id FROM \(unsafeRaw: table) ORDER BY id").map {
                try $0.decode(Int.self, "id")
            }
            #expect(ids == [1])
            try await client.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"))
        }
    }

    @Test func injectionThroughInterpolationIsInert() async throws {
        let table = PostgresTestSupport.tableName("pg_inject")
        try await PostgresTestSupport.withClient { client in
            try await client.withConnection { connection in
                try await connection.execute(unsafeSQL: "CREATE TEMP TABLE \(table) (name text)")
                let attack = "x'); DROP TABLE \(table); --"
                let inserted = try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(attack))")
                #expect(inserted.affectedRows == 1)
                let matches = try await connection.query(
                    "SELECT name FROM \(unsafeRaw: table) WHERE name = \("' OR '1'='1")"
                )
                #expect(matches.isEmpty)
                let all = try await connection.query("SELECT name FROM \(unsafeRaw: table)")
                #expect(try all.map { try $0.decode(String.self, "name") } == [attack])
            }
        }
    }

    @Test func affectedRowsAndMultiStatementExecute() async throws {
        let table = PostgresTestSupport.tableName("pg_affected")
        try await PostgresTestSupport.withClient { client in
            try await client.withConnection { connection in
                try await connection.execute(
                    unsafeSQL: """
                        CREATE TEMP TABLE \(table) (id int);
                        INSERT INTO \(table) SELECT generate_series(1, 5);
                        """
                )
                let updated = try await connection.query("UPDATE \(unsafeRaw: table) SET id = id + 10 WHERE id > \(2)")
                #expect(updated.affectedRows == 3)
                #expect(updated.commandTag == "UPDATE 3")
                let error = await #expect(throws: PostgresError.self) {
                    try await connection.execute(unsafeSQL: "SELECT 1; SELECT * FROM \(table)_missing; SELECT 2")
                }
                #expect(error?.sqlState == .undefinedTable)
            }
        }
    }

    @Test func waitersAreServedWhenConnectionsReturn() async throws {
        try await PostgresTestSupport.withClient(poolSize: 2) { client in
            let pids = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        if index % 2 == 0 {
                            return try await client.query("SELECT pg_backend_pid() AS pid")[0].decode(Int.self, "pid")
                        }
                        return try await client.withTransaction { connection in
                            try await connection.query("SELECT pg_backend_pid() AS pid")[0].decode(Int.self, "pid")
                        }
                    }
                }
                return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
            }
            #expect((1...2).contains(pids.count))
        }
    }

    @Test func cancelledWaiterLeavesThePoolUsable() async throws {
        try await PostgresTestSupport.withClient(poolSize: 1) { client in
            try await client.withConnection { _ in
                let waiter = Task { try await client.query("SELECT 1") }
                waiter.cancel()
                await #expect(throws: CancellationError.self) { try await waiter.value }
            }
            #expect(try await client.query("SELECT 1 AS one")[0].decode(Int.self, "one") == 1)
        }
    }

    @Test func shutdownFailsLaterCalls() async throws {
        let client = try PostgresTestSupport.client()
        _ = try await client.query("SELECT 1")
        await client.shutdown()
        let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(error?.code == .poolShutdown)
    }

    @Test func listenNotifyDelivers() async throws {
        let channel = TestEnvironment.uniqueName("pg-channel")
        try await PostgresTestSupport.withClient { client in
            var notifications = client.notifications(channel: channel).makeAsyncIterator()
            #expect(await notifications.next() == .listening)
            try await client.query("SELECT pg_notify(\(channel), \("first"))")
            try await client.query("SELECT pg_notify(\(channel + "-other"), \("elsewhere"))")
            try await client.query("SELECT pg_notify(\(channel), \("second ✓"))")
            guard case .notification(let first) = await notifications.next(),
                case .notification(let second) = await notifications.next()
            else {
                Issue.record("expected two notifications")
                return
            }
            #expect(first.channel == channel)
            #expect([first.payload, second.payload] == ["first", "second ✓"])
        }
    }

    /// `shutdown()` returns only once each listener's thread has closed its connection and exited: a worker
    /// exits right after, and a thread still in libpq (OpenSSL, on a TLS link) while the process runs its exit
    /// handlers could crash it. The listener here is held in libpq's connect by a server that accepts and
    /// never answers, until `connect_timeout`, well after `shutdown()` was called.
    @Test func shutdownWaitsForEveryListenersThread() async throws {
        let server = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(server >= 0)
        defer { Glibc.close(server) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(server, $0, length) == 0 && Glibc.listen(server, 4) == 0
                    && getsockname(server, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = UInt16(bigEndian: address.sin_port)
        let configuration = try PostgresConfiguration(
            "postgresql://nobody@127.0.0.1:\(port)/none?connect_timeout=2&sslmode=disable")
        let client = PostgresClient(configuration: configuration, logger: PostgresTestSupport.logger)
        let listening = client.notifications(channel: "silent").makeAsyncIterator()  // starts its thread
        #expect(client.listenersRunning == 1)
        await client.shutdown()
        #expect(client.listenersRunning == 0)
        withExtendedLifetime(listening) {}
    }

    @Test func badPasswordFailsToConnectWithoutLeakingIt() async throws {
        var configuration = try PostgresConfiguration(TestEnvironment.postgresURL)
        let password = "wrong-\(UUID().uuidString)"
        configuration.setValue(password, for: "password")
        let client = PostgresClient(configuration: configuration, logger: PostgresTestSupport.logger)
        let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.description.contains(password) == false)
        #expect(!configuration.description.contains(password))
        await client.shutdown()
    }
}

@Suite("Prepared statement cache", .timeLimit(.minutes(6)))
struct PreparedStatementCacheTests {
    /// Runs `body` on the one connection of a client with this cache size, then shuts it down.
    static func withConnection(
        cacheSize: Int, _ body: (PostgresConnection) async throws -> Void
    ) async throws {
        var configuration = try PostgresConfiguration(PostgresTestSupport.ownerURL)
        configuration.poolSize = 1
        configuration.statementCacheSize = cacheSize
        let client = PostgresClient(configuration: configuration, logger: PostgresTestSupport.logger)
        do {
            try await client.withConnection { connection in try await body(connection) }
        } catch {
            await client.shutdown()
            throw error
        }
        await client.shutdown()
    }

    /// The statements this connection has prepared (protocol-level ones have no SQL-level name clash).
    static func preparedCount(_ connection: PostgresConnection) async throws -> Int {
        try await connection.query("SELECT count(*) AS n FROM pg_prepared_statements WHERE NOT from_sql")[0]
            .decode(Int.self, "n")
    }

    @Test("a statement run many times is prepared once per connection, with any values")
    func preparedOnce() async throws {
        try await Self.withConnection(cacheSize: 8) { connection in
            for value in 0..<20 {
                let rows = try await connection.query("SELECT \(value)::int + 1 AS v")
                #expect(try rows[0].decode(Int.self, "v") == value + 1)
            }
            // That statement and the count itself.
            #expect(try await Self.preparedCount(connection) == 2)
            // The same text with a NULL of another type is another statement.
            let none: String? = nil
            #expect(try await connection.query("SELECT \(none)::text IS NULL AS v")[0].decode(Bool.self, "v"))
            #expect(try await Self.preparedCount(connection) == 3)
        }
    }

    @Test("a statement planned every run is never prepared, and runs with its values")
    func plannedEveryRun() async throws {
        try await Self.withConnection(cacheSize: 8) { connection in
            for value in 0..<6 {
                let query: PostgresQuery = "SELECT \(value)::int * 2 AS v"
                let rows = try await connection.query(query.planned(.everyRun))
                #expect(try rows[0].decode(Int.self, "v") == value * 2)
            }
            // Only the count itself.
            #expect(try await Self.preparedCount(connection) == 1)
            // The same text with the default planning is prepared as usual.
            let rows = try await connection.query("SELECT \(7)::int * 2 AS v")
            #expect(try rows[0].decode(Int.self, "v") == 14)
            #expect(try await Self.preparedCount(connection) == 2)
        }
    }

    @Test("beyond the cache size statements run unprepared; size 0 prepares nothing")
    func bounded() async throws {
        for size in [0, 2] {
            try await Self.withConnection(cacheSize: size) { connection in
                for n in 0..<5 {
                    let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT \(n) AS v"))
                    #expect(try rows[0].decode(Int.self, "v") == n)
                }
                #expect(try await Self.preparedCount(connection) == size)
            }
        }
    }

    @Test(
        "a plan made stale under a prepared statement fails that call only, as retriable; the next is prepared afresh"
    )
    func replannedAfterSchemaChange() async throws {
        let table = PostgresTestSupport.tableName("prep")
        try await Self.withConnection(cacheSize: 8) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (a int)"))
            try await connection.query(PostgresQuery(unsafeSQL: "INSERT INTO \(table) VALUES (1)"))
            let select = PostgresQuery(unsafeSQL: "SELECT * FROM \(table)")
            #expect(try await connection.query(select)[0].decode(Int.self, "a") == 1)
            try await connection.query(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) ADD COLUMN b int DEFAULT 2"))
            let error = await #expect(throws: PostgresError.self) { try await connection.query(select) }
            #expect(error?.sqlState?.rawValue == "0A000")
            #expect(error?.stalePlan == true && error?.isRetriable == true, "running it again prepares it anew")
            let row = try await connection.query(select)[0]
            #expect(try row.decode(Int.self, "b") == 2)

            // A plan gone from the server (`DEALLOCATE`, as a pooler's reset does), in a pipeline.
            try await connection.query(PostgresQuery(unsafeSQL: "DEALLOCATE ALL").planned(.everyRun))
            let gone = await #expect(throws: PostgresError.self) { try await connection.pipeline([select, select]) }
            #expect(gone?.sqlState?.rawValue == "26000")
            #expect(gone?.isRetriable == true)
            #expect(try await connection.pipeline([select, select]).count == 2)

            // Not every 0A000 is a stale plan: a statement the server cannot run fails for good.
            let unsupported = await #expect(throws: PostgresError.self) {
                try await connection.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table) FOR UPDATE"))
            }
            #expect(unsupported?.sqlState?.rawValue == "0A000")
            #expect(unsupported?.isRetriable == false)
            try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"))
        }
    }
}

@Suite("Parameters", .timeLimit(.minutes(6)))
struct ParameterTests {
    @Test("a NUL character in a parameter is refused before sending; the connection stays usable")
    func nulIsRefused() async throws {
        try await PostgresTestSupport.withClient { client in
            let refused = await #expect(throws: PostgresError.self) {
                try await client.query("SELECT \("a\u{0}b")::text AS v")
            }
            #expect(refused?.code == .invalidParameter)
            let message = refused?.message ?? ""
            #expect(message.contains("NUL"))
            let unicode = "é 李 🚲 \"q\" \\ " + String(repeating: "x", count: 100_000)
            let echoed = try await client.query("SELECT \(unicode)::text AS v")[0].decode(String.self, "v")
            #expect(echoed == unicode)
            let first = try await client.query("SELECT (\([unicode, "b"])::text[])[1] AS v")[0].decode(String.self, "v")
            #expect(first == unicode)
        }
    }

    @Test("unnest of typed arrays: NULL elements, JSON with quotes and backslashes, dates and numbers")
    func unnestColumns() async throws {
        try await PostgresTestSupport.withClient { client in
            let documents = [
                PostgresJSONText(bytes: Array(#"{"a":"say \"hi\" \\ é","b":[1,null]}"#.utf8)),
                PostgresJSONText(bytes: Array("{}".utf8)),
            ]
            let names: [String?] = ["x \"quoted\"", nil]
            let counts: [Int?] = [nil, 7]
            let when = Date(timeIntervalSince1970: 1_800_000_000.123456)
            let rows = try await client.query(
                """
                SELECT d::text AS d, n, c, w, n IS NULL AS n_null
                FROM unnest(\(documents)::json[], \(PostgresNullableArray(names))::text[],
                            \(PostgresNullableArray(counts))::bigint[], \(PostgresNullableArray([when, nil]))::timestamptz[])
                    WITH ORDINALITY AS r(d, n, c, w, i)
                ORDER BY i
                """)
            #expect(rows.count == 2)
            #expect(try rows[0].decode(String.self, "d") == #"{"a":"say \"hi\" \\ é","b":[1,null]}"#)
            #expect(try rows[0].decode(String?.self, "n") == "x \"quoted\"")
            #expect(try rows[0].decode(Int?.self, "c") == nil)
            #expect(try rows[0].decode(Date?.self, "w") == when)
            #expect(try rows[1].decode(Bool.self, "n_null"))
            #expect(try rows[1].decode(Int?.self, "c") == 7)
            #expect(try rows[1].decode(Date?.self, "w") == nil)
        }
    }

    @Test("binary arrays read back as their text forms do, for every element type that sends them")
    func binaryArraysAgreeWithText() async throws {
        let dates = [
            Date(timeIntervalSince1970: 1_800_000_000.123456), Date(timeIntervalSince1970: -86_400.5),
            Date(timeIntervalSince1970: 946_684_800), Date(timeIntervalSince1970: 0.000_000_4),
        ]
        let doubles = [0.1, -1e300, .infinity, -.infinity, .leastNonzeroMagnitude, -0.0]
        try await PostgresTestSupport.withClient { client in
            // Each pair: the array bound binary, and its text form bound as text and cast by the server;
            // compared as the server prints them (json has no equality).
            func same<Element: PostgresArrayElement>(_ values: [Element?], _ type: String) async throws -> Bool {
                #expect(Element.postgresBinaryElementType != nil)
                let array = PostgresNullableArray(values)
                guard case .binary = array.postgresParameter else { return false }
                let rows = try await client.query(
                    """
                    SELECT \(array)::\(unsafeRaw: type)[]::text[]
                               IS NOT DISTINCT FROM \(array.postgresText)::text::\(unsafeRaw: type)[]::text[]
                           AND cardinality(\(array)::\(unsafeRaw: type)[]) = \(values.count) AS same
                    """)
                return try rows[0].decode(Bool.self, "same")
            }
            #expect(try await same([Int.min, -1, 0, Int.max, nil], "bigint"))
            #expect(try await same([Int64(7), nil], "bigint"))
            #expect(try await same([Int32.min, 0, Int32.max], "integer"))
            #expect(try await same([Int16.min, nil, Int16.max], "smallint"))
            #expect(try await same(doubles, "double precision"))
            #expect(try await same([true, false, nil], "boolean"))
            #expect(try await same([UUID(), nil, UUID()], "uuid"))
            #expect(try await same(dates + [nil], "timestamptz"))
            #expect(try await same([PostgresJSONText(bytes: Array(#"{"a":"\"q\" \\ é"}"#.utf8)), nil], "json"))
            #expect(try await same([Int](), "bigint"))
            #expect(try await same([nil] as [Date?], "timestamptz"))
            // Arrays without NULLs (the eight-byte types are written by a path of their own).
            func sameNonNull<Element: PostgresArrayElement>(_ values: [Element], _ type: String) async throws -> Bool {
                guard case .binary = values.postgresParameter else { return false }
                let rows = try await client.query(
                    """
                    SELECT \(values)::\(unsafeRaw: type)[]::text[]
                               IS NOT DISTINCT FROM \(values.postgresText)::text::\(unsafeRaw: type)[]::text[] AS same
                    """)
                return try rows[0].decode(Bool.self, "same")
            }
            #expect(try await sameNonNull([Int.min, 0, Int.max], "bigint"))
            #expect(try await sameNonNull([Int64.min, 42], "bigint"))
            #expect(try await sameNonNull(doubles, "double precision"))
            #expect(try await sameNonNull(dates, "timestamptz"))
            #expect(try await sameNonNull([Int32.min, 5], "integer"))
            // NaN is not equal to itself in SQL arrays either way: compared apart.
            let nan = try await client.query("SELECT (\([Double.nan]))[1] = 'NaN'::float8 AS nan")
            #expect(try nan[0].decode(Bool.self, "nan"))
        }
    }

    @Test("a malformed document inside a binary json[] is refused by the server; the connection stays usable")
    func binaryJSONArrayIsChecked() async throws {
        try await PostgresTestSupport.withClient { client in
            let documents = [PostgresJSONText(bytes: Array("{}".utf8)), PostgresJSONText(bytes: Array("{oops".utf8))]
            await #expect(throws: PostgresError.self) {
                try await client.query("SELECT count(*) FROM unnest(\(documents)::json[])")
            }
            let rows = try await client.query("SELECT count(*) AS n FROM unnest(\([documents[0]])::json[])")
            #expect(try rows[0].decode(Int.self, "n") == 1)
        }
    }
}

@Suite("Statement cancellation", .timeLimit(.minutes(6)))
struct StatementCancellationTests {
    @Test("cancelling a task cancels its statement on the server, and its connection is not reused")
    func cancellingTheTaskCancelsTheStatement() async throws {
        try await PostgresTestSupport.withClient(poolSize: 1) { client in
            let marker = PostgresTestSupport.tableName("sleep")
            let sleeping = Task {
                try await client.query(PostgresQuery(unsafeSQL: "SELECT pg_sleep(600) AS \(marker)"))
            }
            try await PostgresTestSupport.withClient { observer in
                try await eventually("the statement to run on the server") {
                    let rows = try await observer.query(
                        "SELECT count(*)::bigint AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE \("%" + marker)"
                    )
                    return try rows[0].decode(Int.self, "n") == 1
                }
            }
            sleeping.cancel()
            let result = await sleeping.result
            #expect(throws: PostgresError.self) { try result.get() }
            if case .failure(let error as PostgresError) = result {
                #expect(error.sqlState?.rawValue == "57014", "\(error)")
            }
            // The pool's one connection was discarded, so the next statement runs on a fresh one.
            let after = try await client.query("SELECT pg_backend_pid() AS pid, 1 AS v")
            #expect(try after[0].decode(Int.self, "v") == 1)
        }
    }
}

@Suite("Pipelines: several statements, one round trip", .timeLimit(.minutes(6)))
struct PipelineTests {
    @Test("statements run in order, each seeing the ones before it; prepared or not, each returns its rows")
    func statementsRunInOrder() async throws {
        let table = PostgresTestSupport.tableName("pg_pipe")
        try await PreparedStatementCacheTests.withConnection(cacheSize: 8) { connection in
            try await connection.execute(unsafeSQL: "CREATE TEMP TABLE \(table) (id int PRIMARY KEY, note text)")
            for round in 0..<3 {
                let base = round * 10
                let results = try await connection.pipeline([
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(base + 1), \("one")), (\(base + 2), \("two"))",
                    "UPDATE \(unsafeRaw: table) SET note = note || \("!") WHERE id = \(base + 2) RETURNING id, note",
                    PostgresQuery("SELECT count(*)::int AS n FROM \(unsafeRaw: table)").planned(.everyRun),
                ])
                #expect(results.count == 3)
                #expect(results[0].affectedRows == 2)
                #expect(try results[1].map { try $0.decode(String.self, "note") } == ["two!"])
                #expect(try results[2][0].decode(Int.self, "n") == base / 5 + 2)
            }
            // The two cached statements were prepared once each (and the count's own statement).
            #expect(try await PreparedStatementCacheTests.preparedCount(connection) == 3)
        }
    }

    @Test("a failing statement throws its error, the ones after it do not run, and the connection goes on")
    func aFailureStopsThePipeline() async throws {
        let table = PostgresTestSupport.tableName("pg_pipe_fail")
        try await PreparedStatementCacheTests.withConnection(cacheSize: 8) { connection in
            try await connection.execute(unsafeSQL: "CREATE TEMP TABLE \(table) (id int PRIMARY KEY)")
            try await connection.query("INSERT INTO \(unsafeRaw: table) VALUES (\(1))")
            func ids() async throws -> [Int] {
                try await connection.query("SELECT id FROM \(unsafeRaw: table) ORDER BY id").map {
                    try $0.decode(Int.self, "id")
                }
            }

            // Inside a transaction block: the block has failed, and rolling it back leaves the table as it was.
            try await connection.execute(unsafeSQL: "BEGIN")
            let inBlock = await #expect(throws: PostgresError.self) {
                try await connection.pipeline([
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(2))",
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(1))",
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(3))",
                ])
            }
            #expect(inBlock?.sqlState?.rawValue == "23505")
            #expect(inBlock?.constraintName == "\(table)_pkey")
            let afterFailure = await #expect(throws: PostgresError.self) { try await ids() }
            #expect(afterFailure?.sqlState == .inFailedSQLTransaction)
            try await connection.execute(unsafeSQL: "ROLLBACK")
            #expect(try await ids() == [1])

            // Outside one, the pipeline is one implicit transaction: nothing of it stays. The statement after
            // the failure never ran: a sequence, which no rollback resets, was not advanced.
            try await connection.execute(unsafeSQL: "CREATE TEMP SEQUENCE \(table)_seq")
            await #expect(throws: PostgresError.self) {
                try await connection.pipeline([
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(4))",
                    "INSERT INTO \(unsafeRaw: table) VALUES (\(1))",
                    "SELECT nextval(\(table + "_seq")::regclass) AS n",
                ])
            }
            #expect(try await ids() == [1])
            let sequence = try await connection.query("SELECT is_called FROM \(unsafeRaw: table)_seq")
            #expect(try sequence[0].decode(Bool.self, "is_called") == false)

            // And the next pipeline on the same connection works.
            let results = try await connection.pipeline([
                "INSERT INTO \(unsafeRaw: table) VALUES (\(6))", "SELECT max(id) AS m FROM \(unsafeRaw: table)",
            ])
            #expect(try results[1][0].decode(Int.self, "m") == 6)
        }
    }
}
