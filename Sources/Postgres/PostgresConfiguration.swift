import CLibPQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where and how to connect, and how large the pool is.
///
/// The connection string is libpq's own, parsed by libpq (`PQconninfoParse`), so everything libpq
/// understands works unchanged:
/// - URLs, `postgresql://user:pass@host:port/db?sslmode=require`, with several hosts for failover:
///   `postgresql://user@db1:5432,db2:5432/db?target_session_attrs=read-write` (libpq tries them in
///   order and keeps the first that accepts a read-write session);
/// - keyword/value strings: `host=db1,db2 port=5432,5432 dbname=db target_session_attrs=read-write`;
/// - `passfile`, `service` (`pg_service.conf`) and the `PG*` environment variables, applied when connecting.
///
/// What is not libpq's (the pool's size, the statement cache, a statement timeout for every session)
/// is set on the value. `description` never shows the password; neither does any error thrown here.
package struct PostgresConfiguration: Sendable, CustomStringConvertible {
    /// One `keyword=value` pair of the connection string, as libpq parsed it.
    package struct Parameter: Sendable, Hashable {
        package var keyword: String
        package var value: String
    }

    /// The options the connection string set, in libpq's order. Holds the password: never log it.
    package private(set) var parameters: [Parameter]

    /// The `application_name` to report when the connection string sets none (libpq's
    /// `fallback_application_name`: the operator's choice wins).
    package var applicationName: String?
    /// Bound on opening one connection to one host (libpq `connect_timeout`, whole seconds, at least 2),
    /// unless the connection string or `PGCONNECT_TIMEOUT` sets its own.
    package var connectTimeout: Duration = .seconds(10)
    /// Server-side `statement_timeout` for every session; nil leaves the server's setting.
    package var statementTimeout: Duration?
    /// Maximum number of connections `PostgresClient` opens.
    package var poolSize: Int = 8
    /// Statements each connection prepares once and then executes by name (server-side parse and
    /// plan saved); the first this many distinct statements are kept, later ones run unprepared.
    /// 0 prepares nothing (e.g. behind a pooler in transaction mode without prepared statements).
    package var statementCacheSize: Int = 256

    /// libpq's defaults and the `PG*` environment variables alone, as an empty connection string.
    package init() {
        parameters = []
    }

    /// Parses a libpq connection string (URL or keyword/value). Throws `.invalidConfiguration` with
    /// libpq's reason, from which anything the string said (a password, say) has been cut.
    package init(_ connectionString: String) throws(PostgresError) {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            let reason = error.map { String(cString: $0) } ?? "libpq could not parse it"
            if let error { PQfreemem(error) }
            throw PostgresError(
                code: .invalidConfiguration,
                message: "not a valid connection string: \(Self.withoutQuotedText(reason))")
        }
        defer { PQconninfoFree(options) }
        var parameters: [Parameter] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                parameters.append(Parameter(keyword: String(cString: keyword), value: String(cString: value)))
            }
            option += 1
        }
        self.parameters = parameters
    }

    /// The value the connection string gave `keyword` (`host`, `port`, `user`, `dbname`, …), if any.
    /// `host` and `port` may be comma-separated lists.
    package func value(_ keyword: String) -> String? {
        parameters.last(where: { $0.keyword == keyword })?.value
    }

    /// Sets (or, with nil, removes) one libpq option, as if the connection string had said it.
    package mutating func setValue(_ value: String?, for keyword: String) {
        parameters.removeAll { $0.keyword == keyword }
        if let value { parameters.append(Parameter(keyword: keyword, value: value)) }
    }

    /// The connection string as libpq's environment variables (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`,
    /// `PGPASSWORD`, …), for a child process such as `psql` or `pgbench`. Holds the password.
    package var environment: [String: String] {
        var environment: [String: String] = [:]
        for parameter in parameters {
            guard let name = Self.environmentNames[parameter.keyword] else { continue }
            environment[name] = parameter.value
        }
        return environment
    }

    private static let environmentNames = [
        "host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE",
        "password": "PGPASSWORD", "passfile": "PGPASSFILE", "service": "PGSERVICE", "sslmode": "PGSSLMODE",
        "sslrootcert": "PGSSLROOTCERT", "connect_timeout": "PGCONNECT_TIMEOUT",
        "target_session_attrs": "PGTARGETSESSIONATTRS", "options": "PGOPTIONS",
    ]

    /// The connection string in keyword/value form with the password masked: safe to print.
    package var description: String {
        parameters.map { parameter in
            let value = Self.isSecret(parameter.keyword) ? "********" : parameter.value
            return "\(parameter.keyword)=\(Self.quoted(value))"
        }.joined(separator: " ")
    }

    private static func isSecret(_ keyword: String) -> Bool {
        keyword == "password" || keyword == "sslpassword"
    }

    /// What `PQconnectdbParams` gets: our defaults, overridden by the connection string, then what the
    /// decoders rely on. Holds the password: never log it.
    var connectionParameters: [Parameter] {
        var result: [Parameter] = []
        // libpq reads PGCONNECT_TIMEOUT only for an option nobody passed: ours is a default, not an override.
        if getenv("PGCONNECT_TIMEOUT") == nil {
            result.append(
                Parameter(keyword: "connect_timeout", value: String(max(2, connectTimeout.components.seconds))))
        }
        // No GSSAPI encryption unless asked for. libpq's default ("prefer") initializes Kerberos on each connect, and
        // a short-lived process (an admin command) that exits while a connection thread is inside it crashed in
        // Kerberos's lock as its exit handlers tore that library down. A deployment that uses it says so, in the
        // connection string or PGGSSENCMODE.
        if getenv("PGGSSENCMODE") == nil {
            result.append(Parameter(keyword: "gssencmode", value: "disable"))
        }
        result += [
            Parameter(keyword: "keepalives", value: "1"),
            Parameter(keyword: "keepalives_idle", value: "30"),
            Parameter(keyword: "keepalives_interval", value: "10"),
            Parameter(keyword: "keepalives_count", value: "3"),
        ]
        if let applicationName {
            result.append(Parameter(keyword: "fallback_application_name", value: applicationName))
        }
        result += parameters.filter { $0.keyword != "options" && $0.keyword != "client_encoding" }
        // The decoders read text as UTF-8 and timestamps in ISO style and UTC, whatever the server's defaults.
        result.append(Parameter(keyword: "client_encoding", value: "UTF8"))
        var options = value("options").map { $0 + " " } ?? ""
        options += "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=postgres"
        if let statementTimeout { options += " -c statement_timeout=\(statementTimeout.milliseconds)" }
        result.append(Parameter(keyword: "options", value: options))
        return result
    }

    /// A keyword/value value, single-quoted when it must be (backslash and quote escaped).
    static func quoted(_ value: String) -> String {
        let plain = !value.isEmpty && !value.contains { $0 == " " || $0 == "'" || $0 == "\\" || $0.isNewline }
        if plain { return value }
        var escaped = "'"
        for character in value {
            if character == "\\" || character == "'" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped + "'"
    }

    /// libpq's parse errors quote the part of the string they stumbled on, which may be a password.
    /// A message holds at most one such part, after any quoted punctuation of libpq's own (`missing "="
    /// after "…"`), and the part may hold quotes itself: everything from its opening quote to the
    /// message's last quote is the caller's, and is cut. An unknown keyword survives only as a near miss
    /// of one of libpq's own (`invalid connection option "sslmod" (did you mean "sslmode"?)`): what libpq
    /// takes for a keyword may be part of a value, as in `postgre{ql://user:pw@host`, a URL misspelt, or
    /// `password='a'b…=`, a quote misplaced, where libpq reads `b…` as a keyword (all found by
    /// scripts/fuzz).
    /// Works on the bytes: a quote followed by a combining mark is one `Character`, which would hide the
    /// quote (scripts/fuzz).
    static func withoutQuotedText(_ message: String) -> String {
        var bytes = Array(message.utf8)
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes.removeLast() }
        let quote = UInt8(ascii: "\"")
        let quotesKeyword =
            bytes.starts(with: "invalid connection option".utf8)
            || bytes.starts(with: "invalid URI query parameter".utf8)
        // `missing "=" after "…"`, `… matching "]" in IPv6 host address …`, `unexpected character "X" at position …`,
        // `extra key/value separator "=" in URI query parameter: "…"`.
        let punctuated = [
            "missing \"", "end of string reached when looking for matching \"", "unexpected character \"",
            "extra key/value separator \"",
        ].contains { bytes.starts(with: $0.utf8) }
        var result: [UInt8] = []
        var start = bytes.startIndex
        var first = true
        while let open = bytes[start...].firstIndex(of: quote) {
            result += bytes[start..<open]
            let afterOpen = open + 1
            // libpq's own punctuation, such as "=", comes first in the messages that have it: one ASCII
            // character that is neither a letter nor a digit. In any other message the first quote opens the
            // caller's text, which may itself begin with a quoted character (`" "…`, `"$"…`: scripts/fuzz).
            if first, punctuated, afterOpen + 1 < bytes.count, bytes[afterOpen + 1] == quote,
                bytes[afterOpen] < 0x80,
                !Character(Unicode.Scalar(bytes[afterOpen])).isLetter,
                !Character(Unicode.Scalar(bytes[afterOpen])).isNumber
            {
                first = false
                result += bytes[open...(afterOpen + 1)]
                start = afterOpen + 2
                continue
            }
            guard let last = bytes.lastIndex(of: quote), last > open else {
                return String(decoding: result, as: UTF8.self) + "\"…"
            }
            let quoted = String(decoding: bytes[afterOpen..<last], as: UTF8.self)
            let meant = quotesKeyword ? nearestKeyword(to: quoted) : nil
            var text = String(decoding: result, as: UTF8.self) + "\"" + (meant == nil ? "…" : quoted) + "\""
            text += String(decoding: bytes[(last + 1)...], as: UTF8.self)
            if let meant { text += " (did you mean \"\(meant)\"?)" }
            return text
        }
        return String(decoding: result + bytes[start...], as: UTF8.self)
    }

    /// The keyword libpq knows that `word` misspells (at most two edits away, and not too short to
    /// tell), or nil: a word that is no near miss is not named, since it may be part of a value.
    static func nearestKeyword(to word: String) -> String? {
        let typed = Array(word.lowercased().utf8)
        guard (3...40).contains(typed.count) else { return nil }
        var best: (keyword: String, distance: Int)?
        for keyword in knownKeywords {
            let distance = editDistance(typed, Array(keyword.utf8))
            if distance <= min(2, keyword.utf8.count / 3), distance < best?.distance ?? .max {
                best = (keyword, distance)
            }
        }
        return best?.keyword
    }

    /// libpq's own keywords (`PQconndefaults`), the options a connection string may set.
    static let knownKeywords: [String] = {
        guard let options = PQconndefaults() else { return [] }
        defer { PQconninfoFree(options) }
        var keywords: [String] = []
        var option = options
        while let keyword = option.pointee.keyword {
            keywords.append(String(cString: keyword))
            option += 1
        }
        return keywords
    }()

    /// Levenshtein distance, for words of a few dozen bytes.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        var current = previous
        for i in a.indices {
            current[0] = i + 1
            for j in b.indices {
                current[j + 1] = Swift.min(
                    previous[j + 1] + 1, current[j] + 1, previous[j] + (a[i] == b[j] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

extension Duration {
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
