import ArgumentParser
import Foundation
import LiveDeliveryAdmin
import LiveDeliveryJSON
import Logging

enum LogFormat: String, ExpressibleByArgument, Sendable {
    case logfmt, json
}

/// One line per record on stderr, as logfmt or JSON; metadata keys as given (no secrets are
/// ever put in metadata by the library).
struct StderrLogHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String, format: LogFormat) {
        self.label = label
        self.format = format
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields: [(String, String)] = [
            ("ts", Self.timestamp.format(Date())),
            ("level", event.level.rawValue),
            ("msg", event.message.description),
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for key in merged.keys.sorted() { fields.append((key, "\(merged[key]!)")) }
        let line: String
        switch format {
        case .logfmt:
            // A value with a space, quote, equals sign, backslash or control character (or a character
            // written as an escape below) is quoted and escaped as in JSON, so that every record stays
            // on one line.
            line = fields.map { key, value in
                let needsQuotes =
                    value.isEmpty
                    || value.unicodeScalars.contains {
                        $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || $0.value < 0x20
                            || TerminalText.isEscapedInJSON($0)
                    }
                return needsQuotes ? "\(key)=\(JSONWriter.quoted(value))" : "\(key)=\(value)"
            }.joined(separator: " ")
        case .json:
            line = "{" + fields.map { "\(JSONWriter.quoted($0)):\(JSONWriter.quoted($1))" }.joined(separator: ",") + "}"
        }
        // Order ids, event ids and routing keys come from publishers: C1 characters, bidirectional
        // controls and line separators inside the quoted values are written as `\uXXXX` escapes.
        FileHandle.standardError.write(Data((TerminalText.escapedJSON(line) + "\n").utf8))
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-25T12:56:25.935Z`.
    static let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
