import Foundation
import Testing

@testable import Postgres

@Suite struct PostgresQueryTests {
    @Test func interpolationsBecomeNumberedBinds() {
        let name = "x'); DROP TABLE t; --"
        let id = 42
        let missing: String? = nil
        let query: PostgresQuery =
            "SELECT * FROM \(unsafeRaw: "orders") WHERE name = \(name) AND id = \(id) OR n = \(missing)"
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
        #expect(
            ["a,b", "c\"d", "{e}", "back\\slash", "NULL"].postgresText == #"{"a,b","c\"d","{e}","back\\slash","NULL"}"#)
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
        #expect(
            [1, -2].postgresParameter
                == .binary(
                    big + [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 8] + [UInt8](repeating: 0xff, count: 7) + [
                        0xfe
                    ]))
        let nullable = PostgresNullableArray([PostgresJSONText(bytes: Array("{}".utf8)), nil])
        #expect(
            nullable.postgresParameter
                == .binary([
                    0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 114, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0x7b, 0x7d, 0xff, 0xff,
                    0xff, 0xff,
                ]))
        #expect([Bool]().postgresParameter == .binary([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16]))
        #expect(["a"].postgresParameter == .text(#"{"a"}"#))
        let query: PostgresQuery = "SELECT \([true]), \("x")"
        #expect(query.binds.values == [nil, "x"])
    }

    @Test func bytesGoAsTheyAreAndReadBackFromHex() {
        let query: PostgresQuery = "SELECT \([0x00, 0xff, 0x10] as [UInt8])"
        #expect(query.binds.parameters == [.binary([0x00, 0xff, 0x10])])
        #expect(query.binds.types == [.bytea])
        #expect(PostgresBytes([0x00, 0xff, 0x10]).postgresText == #"\x00ff10"#)
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
        #expect(
            PostgresTimestamp.microsecondsSince1970(fraction) - PostgresTimestamp.microsecondsSince1970(base) == 500_000
        )
        #expect(PostgresTimestamp.parse("infinity") == nil)
        #expect(PostgresTimestamp.parse("2024-13-10 12:00:00+00") == nil)
        #expect(PostgresTimestamp.parse("2024-03-10 12:00:00+00 trailing") == nil)
        // Past what microseconds since 1970 in an Int64 hold (PostgreSQL's last days, in 294276, are just past
        // it): refused with a decoding error, not a trap (scripts/fuzz found the trap).
        #expect(PostgresTimestamp.parse("2000000000000026-11-21 10:04:06.10") == nil)
        #expect(PostgresTimestamp.parse("9999999-12-31 23:59:59+00") == nil)
        #expect(PostgresTimestamp.parse("294276-12-31 23:59:59+00") == nil)
        #expect(PostgresTimestamp.parse("200000-01-01 00:00:00+00") != nil)
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
    /// The value `PQconnectdbParams` would get for `keyword` (the last one wins, as in libpq).
    static func connecting(_ configuration: PostgresConfiguration, _ keyword: String) -> String? {
        configuration.connectionParameters.last(where: { $0.keyword == keyword })?.value
    }

    @Test func libpqParsesAURL() throws {
        var configuration = try PostgresConfiguration(
            "postgresql://app%40x:p%40ss%27w%5Cd@db.internal:6543/orders?application_name=worker&sslmode=require"
                + "&connect_timeout=7&keepalives_idle=20")
        configuration.statementTimeout = .milliseconds(2500)
        #expect(configuration.value("user") == "app@x")
        #expect(configuration.value("password") == "p@ss'w\\d")
        #expect(configuration.value("host") == "db.internal")
        #expect(configuration.value("port") == "6543")
        #expect(configuration.value("dbname") == "orders")
        #expect(Self.connecting(configuration, "application_name") == "worker")
        #expect(Self.connecting(configuration, "connect_timeout") == "7")
        #expect(Self.connecting(configuration, "keepalives_idle") == "20")
        #expect(Self.connecting(configuration, "keepalives") == "1")
        #expect(Self.connecting(configuration, "client_encoding") == "UTF8")
        #expect(Self.connecting(configuration, "options")?.contains("-c statement_timeout=2500") == true)
    }

    @Test("GSSAPI encryption is off unless the connection string asks for it")
    func gssEncryptionOnlyWhenAsked() throws {
        #expect(Self.connecting(try PostgresConfiguration("postgresql://u@db/orders"), "gssencmode") == "disable")
        let asked = try PostgresConfiguration("postgresql://u@db/orders?gssencmode=require")
        #expect(Self.connecting(asked, "gssencmode") == "require")
    }

    @Test func severalHostsAndKeywordStringsAreLibpqs() throws {
        let url = try PostgresConfiguration(
            "postgresql://u:pw@127.0.0.1:55451,127.0.0.1:55452/ld?target_session_attrs=read-write")
        #expect(url.value("host") == "127.0.0.1,127.0.0.1")
        #expect(url.value("port") == "55451,55452")
        #expect(url.value("target_session_attrs") == "read-write")
        let keywords = try PostgresConfiguration(
            #"host=db1,db2 port=5432,5433 dbname=ld user=u password='it\'s secret' passfile=/etc/pgpass service=ld"#)
        #expect(keywords.value("host") == "db1,db2")
        #expect(keywords.value("passfile") == "/etc/pgpass")
        #expect(keywords.value("service") == "ld")
        #expect(keywords.environment["PGPORT"] == "5432,5433")
        #expect(keywords.value("password") == "it's secret")
        #expect(!keywords.description.contains("secret"))
    }

    @Test func theOperatorsApplicationNameWinsOverOurs() throws {
        var configuration = try PostgresConfiguration("postgresql://u@h/d?application_name=mine")
        configuration.applicationName = "livedelivery worker"
        #expect(Self.connecting(configuration, "application_name") == "mine")
        #expect(Self.connecting(configuration, "fallback_application_name") == "livedelivery worker")
        var withOptions = try PostgresConfiguration("dbname=d options='-c work_mem=64MB'")
        withOptions.statementTimeout = .seconds(1)
        let options = Self.connecting(withOptions, "options") ?? ""
        #expect(options.hasPrefix("-c work_mem=64MB "))
        #expect(options.contains("-c TimeZone=UTC"))
    }

    @Test func descriptionRedactsThePassword() throws {
        for text in [
            "postgres://u:topsecret@h/d", "postgresql://u@h/d?password=topsecret",
            "host=h user=u password=topsecret", "host=h sslpassword=topsecret",
        ] {
            let configuration = try PostgresConfiguration(text)
            #expect(!configuration.description.contains("topsecret"), "\(configuration.description)")
            #expect(configuration.description.contains("********"))
        }
        #expect(
            try PostgresConfiguration("postgres://u:topsecret@h:6000/d").description
                == "user=u password=******** dbname=d host=h port=6000")
    }

    /// libpq's parse errors quote what they stumbled on; none of it may be a secret.
    @Test(arguments: [
        "mysql://u:topsecret@h/d", "host=h password topsecret", "postgresql://u:topsecret@h/d?x",
        "postgresql://u:top%zzsecret@h/d", "host=h password='topsecret", "postgresql://u:topsecret@[::1/d",
        "amqp//u:topsecret@h",
        // A misspelt scheme: libpq quotes everything up to the first `=` as an unknown keyword (scripts/fuzz).
        "postgre{ql://u:topsecret@db1:5432/d?sslmode=verify-full", "host=h u:topsecret@db?x=1",
        // Quotes inside the part libpq quotes (scripts/fuzz).
        #"postgresql://h/d?x"topsecret"y"#, #"host=h "topsecret" x"#, #"x"-"topsecret"#,
        // A quote misplaced: libpq reads the rest of the password as a keyword (scripts/fuzz).
        "host=h password='top'secret55=x dbname=d", "postgresql://u@h/d?password=top&secret=1",
        // A combining mark after libpq's opening quote: one Character with it (scripts/fuzz).
        "host=h \u{30F}topsecret=x",
        // A keyword that begins like libpq's quoted punctuation, `"$"` (scripts/fuzz).
        #"host=h $"topsecret"x=1"#,
        // A percent-encoded token that begins with a quoted space (scripts/fuzz).
        #"postgres:// "%zztopsecret@h/d"#,
    ])
    func malformedStringsAreRefusedWithoutEchoingThem(_ text: String) {
        #expect {
            try PostgresConfiguration(text)
        } throws: { error in
            let error = error as? PostgresError
            return error?.code == .invalidConfiguration && !(error?.description.contains("secret") ?? true)
                && error?.description.contains("not a valid connection string") == true
        }
    }

    @Test func libpqsReasonKeepsItsPunctuation() {
        #expect {
            try PostgresConfiguration("host=h topsecret")
        } throws: { error in
            (error as? PostgresError)?.message
                == #"not a valid connection string: missing "=" after "…" in connection info string"#
        }
    }

    /// A near miss of one of libpq's keywords is named, with the keyword meant; any other unknown word is
    /// not, since it may be part of a value.
    @Test(arguments: [
        ("host=h sslmod=require", #"invalid connection option "sslmod" (did you mean "sslmode"?)"#),
        ("postgresql://u@h/d?sslmdoe=require", #"invalid URI query parameter: "sslmdoe" (did you mean "sslmode"?)"#),
        ("host=h tagret_session_attrs=any", #"(did you mean "target_session_attrs"?)"#),
        ("postgresql://u@h/d?pool_size=3", #"invalid URI query parameter: "…""#),
    ])
    func unknownOptionsAreNamedWhenTheyAreNearMisses(_ text: String, _ expected: String) {
        #expect {
            try PostgresConfiguration(text)
        } throws: { error in
            (error as? PostgresError)?.message?.contains(expected) == true
        }
    }
}
