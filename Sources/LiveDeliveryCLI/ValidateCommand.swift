import ArgumentParser
import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON

/// `livedelivery validate`: tells a publisher, before publishing and without a broker, which events the worker
/// would refuse and why, by giving each line to the worker's own decoder (docs/events.md, docs/asyncapi.yaml).
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Says which events (JSON lines) the worker would refuse, and why, without a broker.",
        discussion: """
            Each non-empty line of each FILE (or of standard input, with no FILE or '-') is one message body. \
            Each is decoded exactly as the worker decodes a message, with its routing key taken to be its \
            `type`. Not checked here: the AMQP headers, and whether `bundle_id` and `environment` name an app \
            of the worker's apps file (`unknown_app`). Exit status 1 when an event would be refused.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    @Argument(help: "JSON-lines files of events ('-' or none: standard input).")
    var files: [String] = []

    @Option(
        help:
            "text: one line per refused event and a summary; json: one object per event (line, accepted, reason, field, message)."
    )
    var format: Format = .text

    func run() throws {
        var accepted = 0
        var refused = 0
        let output = FileHandle.standardOutput
        for file in files.isEmpty ? ["-"] : files {
            let bytes: [UInt8]
            if file == "-" {
                bytes = Array(FileHandle.standardInput.readDataToEndOfFile())
            } else {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw ValidationError("cannot read '\(file)'")
                }
                bytes = Array(data)
            }
            var lineNumber = 0
            for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                lineNumber += 1
                var body = Array(line)
                if body.last == UInt8(ascii: "\r") { body.removeLast() }
                if body.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                let result = EventDecoder.decode(body)
                let place = file == "-" ? "stdin" : file
                switch (result, format) {
                case (.success, .text):
                    accepted += 1
                case (.success(let event), .json):
                    accepted += 1
                    output.write(
                        Self.jsonLine([
                            ("file", .string(place)), ("line", .int(lineNumber)), ("accepted", .bool(true)),
                            ("type", .string(event.type.rawValue)),
                        ]))
                case (.failure(let rejection), .text):
                    refused += 1
                    output.write(Data("\(place):\(lineNumber): refused: \(rejection)\n".utf8))
                case (.failure(let rejection), .json):
                    refused += 1
                    output.write(
                        Self.jsonLine([
                            ("file", .string(place)), ("line", .int(lineNumber)), ("accepted", .bool(false)),
                            ("reason", .string(rejection.reason.rawValue)),
                            ("field", rejection.field.map(JSONValue.string) ?? .null),
                            ("message", .string(rejection.message)),
                        ]))
                }
            }
        }
        if format == .text {
            output.write(Data("\(accepted + refused) events: \(accepted) accepted, \(refused) refused\n".utf8))
        }
        if refused > 0 { throw ExitCode(1) }
    }

    private static func jsonLine(_ members: [(String, JSONValue)]) -> Data {
        Data(JSONValue.object(JSONObject(members)).serialized() + [UInt8(ascii: "\n")])
    }
}
