import Foundation
import Testing

@testable import Postgres

@Suite struct PostgresQueryTests {
    @Test func interpolationsBecomeNumberedBinds() {
        let name = "x'); DROP TABLE t; --"
        let id = 42
        let missing: String? = nil
        let query: PostgresQuery = "SELECT * FROM \(unsafeRaw: "orders") WHERE name = \(name) AND id = \(id) OR n = \(missing)"
        #expect(query.sql == "SELECT * FROM orders WHERE name = $1 AND id = $2 OR n = $3")
        #expect(query.binds.values == [name, "42", nil])
        #expect(query.binds.types == [.unspecified, .int8, .unspecified])
    }

    @Test func integerLiteralsAreWrittenNotBound() {
        let query: PostgresQuery = "SELECT * FROM t WHERE a = \(7) LIMIT \(literal: 250) OFFSET \(literal: -1)"
        #expect(query.sql == "SELECT * FROM t WHERE a = $1 LIMIT 250 OFFSET -1")
        #expect(query.binds.count == 1)
    }

    @Test func plainLiteralHasNoBinds() {
        let query: PostgresQuery = "SELECT 1"
        #expect(query.sql == "SELECT 1")
        #expect(query.binds.count == 0)
    }

    @Test func arraysUseQuotedElements() {
        #expect(["a,b", "c\"d", "{e}", "back\\slash", "NULL"].postgresText == #"{"a,b","c\"d","{e}","back\\slash","NULL"}"#)
        #expect([1, -2].postgresText == #"{"1","-2"}"#)
        #expect([Int]().postgresText == "{}")
        #expect(PostgresNullableArray(["é\"", nil, "\\", ""]).postgresText == #"{"é\"",NULL,"\\",""}"#)
        #expect([Substring("x\"y")].postgresText == #"{"x\"y"}"#)
        #expect([String]().postgresText == "{}")
        #expect([Int].postgresType == .int8Array)
    }

    @Test("arrays of fixed-type elements bind in array_recv's binary layout; strings stay text")
    func binaryArrayLayout() {
        let big: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 1]
        #expect([1, -2].postgresParameter == .binary(big + [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 8] + [UInt8](repeating: 0xff, count: 7) + [0xfe]))
        let nullable = PostgresNullableArray([PostgresJSONText(bytes: Array("{}".utf8)), nil])
        #expect(nullable.postgresParameter == .binary([0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 114, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0x7b, 0x7d, 0xff, 0xff, 0xff, 0xff]))
        #expect([Bool]().postgresParameter == .binary([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16]))
        #expect(["a"].postgresParameter == .text(#"{"a"}"#))
        let query: PostgresQuery = "SELECT \([true]), \("x")"
        #expect(query.binds.values == [nil, "x"])
    }

    @Test func bytesAreHex() {
        let query: PostgresQuery = "SELECT \([0x00, 0xff, 0x10] as [UInt8])"
        #expect(query.binds.values == [#"\x00ff10"#])
        #expect(query.binds.types == [.bytea])
        #expect(PostgresHex.decode(#"\x00ff10"#) == [0x00, 0xff, 0x10])
        #expect(PostgresHex.decode(#"\x0"#) == nil)
    }

    @Test func doublesKeepSpecialValues() {
        #expect(Double.infinity.postgresText == "Infinity")
        #expect((-Double.infinity).postgresText == "-Infinity")
        #expect(Double.nan.postgresText == "NaN")
        #expect(Double(0.1).postgresText == "0.1")
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01 00:00:00.000000+00"),
        (Int64(1_700_000_000_123_456), "2023-11-14 22:13:20.123456+00"),
        (Int64(-1), "1969-12-31 23:59:59.999999+00"),
        (Int64(253_402_300_799_500_000), "9999-12-31 23:59:59.500000+00"),
        (Int64(-62_135_596_800_000_000), "0001-01-01 00:00:00.000000+00"),
        (Int64(-62_135_596_800_500_000), "0001-12-31 23:59:59.500000+00 BC"),
    ])
    // (Date is a Double: far from 2001 it cannot hold every microsecond, so the extremes use half seconds.)
    func timestampsFormatAndParse(micros: Int64, text: String) throws {
        let date = PostgresTimestamp.date(microsecondsSince1970: micros)
        #expect(PostgresTimestamp.format(date) == text)
        let parsed = try #require(PostgresTimestamp.parse(text))
        #expect(PostgresTimestamp.microsecondsSince1970(parsed) == micros)
    }

    @Test func timestampsParseOffsetsAndShortFractions() throws {
        let base = try #require(PostgresTimestamp.parse("2024-03-10 12:00:00+00"))
        #expect(PostgresTimestamp.parse("2024-03-10 17:30:00+05:30") == base)
        #expect(PostgresTimestamp.parse("2024-03-10 07:00:00-05") == base)
        let fraction = try #require(PostgresTimestamp.parse("2024-03-10 12:00:00.5+00"))
        #expect(PostgresTimestamp.microsecondsSince1970(fraction) - PostgresTimestamp.microsecondsSince1970(base) == 500_000)
        #expect(PostgresTimestamp.parse("infinity") == nil)
        #expect(PostgresTimestamp.parse("2024-13-10 12:00:00+00") == nil)
        #expect(PostgresTimestamp.parse("2024-03-10 12:00:00+00 trailing") == nil)
    }

    @Test func errorDescriptionLeavesOutServerTextAndValues() {
        var error = PostgresError(
            code: .server,
            sqlState: .uniqueViolation,
            message: "duplicate key value violates unique constraint \"users_email_key\""
        )
        error.detail = "Key (email)=(secret@example.com) already exists."
        error.constraintName = "users_email_key"
        #expect(error.description.contains("23505 unique_violation"))
        #expect(error.description.contains("users_email_key"))
        #expect(!error.description.contains("secret@example.com"))
        #expect(error.debugDescription.contains("secret@example.com"))
        #expect(!error.isRetriable)
        #expect(PostgresError(code: .server, sqlState: .serializationFailure).isRetriable)
        #expect(PostgresError(code: .server, sqlState: .adminShutdown).isConnectionError)
        #expect(PostgresError(code: .server, sqlState: SQLState("08006")).isRetriable)
        #expect(!PostgresError(code: .decoding).isRetriable)
    }
}

@Suite struct PostgresConfigurationTests {
    @Test func parsesURL() throws {
        let configuration = try PostgresConfiguration(
            url: "postgresql://app%40x:p%40ss%27w%5Cd@db.internal:6543/orders?application_name=worker&sslmode=require"
                + "&connect_timeout=7&statement_timeout=2500&pool_size=3&keepalives_idle=20"
        )
        #expect(configuration.user == "app@x")
        #expect(configuration.password == "p@ss'w\\d")
        #expect(configuration.host == "db.internal")
        #expect(configuration.port == 6543)
        #expect(configuration.database == "orders")
        #expect(configuration.applicationName == "worker")
        #expect(configuration.sslMode == "require")
        #expect(configuration.connectTimeout == .seconds(7))
        #expect(configuration.statementTimeout == .milliseconds(2500))
        #expect(configuration.poolSize == 3)
        #expect(configuration.extraOptions == ["keepalives_idle": "20"])
        let conninfo = configuration.connectionString
        #expect(conninfo.contains(#"password='p@ss\'w\\d'"#))
        #expect(conninfo.contains("keepalives='1'"))
        #expect(conninfo.contains("connect_timeout='7'"))
        #expect(conninfo.contains("statement_timeout=2500"))
    }

    @Test func descriptionRedactsThePassword() throws {
        let configuration = try PostgresConfiguration(url: "postgres://u:topsecret@h/d")
        #expect(!configuration.description.contains("topsecret"))
        #expect(configuration.description.contains("postgresql://u:********@h:5432/d"))
    }

    @Test func rejectsOtherSchemesWithoutEchoingTheURL() {
        #expect {
            try PostgresConfiguration(url: "mysql://u:topsecret@h/d")
        } throws: { error in
            let error = error as? PostgresError
            return error?.code == .invalidConfiguration && !(error?.description.contains("topsecret") ?? true)
        }
        #expect(throws: PostgresError.self) { try PostgresConfiguration(url: "postgresql://u@h/d?pool_size=0") }
        #expect(throws: PostgresError.self) { try PostgresConfiguration(url: "postgresql://h/d") }
    }
}
