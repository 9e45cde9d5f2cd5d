import Foundation  // linked for the modules below, which use it
import LiveDeliveryCore
import Postgres
import RabbitMQ

// libFuzzer's target for what an operator writes: the first byte picks the parser, the rest is its input.
//
// - 0: policy.json, 1: content-mapping.json (LiveDeliveryCore's decoders): never crash; a refusal names
//   its problems.
// - 2: an AMQP URL (the RabbitMQ wrapper's parser), 3: a libpq connection string (libpq's own parser,
//   through the wrapper): never crash; an error never shows the password the seeds plant (the errors
//   name the problem, not the text), and the description of what parsed never shows its password.
//
// Built and run by scripts/fuzz; seeds in Tests/Fuzz/corpus/settings.

/// The password the inputs of 2 and 3 may carry (the seeds do): it must never come out.
let secret = "Sw0rdf1shX"

/// libFuzzer's entry point: one input, any bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSettings(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 4 {
    case 0:
        do { _ = try Policy.decode(bytes) } catch {
            require(!error.problems.isEmpty, "a refusal without a reason")
        }
    case 1:
        do { _ = try ContentMapping.decode(bytes) } catch {
            require(!error.problems.isEmpty, "a refusal without a reason")
        }
    case 2:
        let text = String(decoding: bytes, as: UTF8.self)
        do {
            var configuration = try AMQPConfiguration(url: text)
            let description = configuration.description
            configuration.password = "other"
            require(configuration.description == description, "an AMQP description shows the password")
        } catch {
            require(!plantedAsPassword(text) || !"\(error)".contains(secret), "an AMQP URL error shows the password")
        }
    default:
        // libpq reads C strings: the text stops at the first NUL, as the worker's would.
        let text = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        do {
            let configuration = try PostgresConfiguration(text)
            // The description does not change with the password (setValue moves the option to the end: the
            // options are compared in any order).
            var other = configuration
            if configuration.value("password") != nil { other.setValue("another", for: "password") }
            require(
                configuration.description.split(separator: " ").sorted()
                    == other.description.split(separator: " ").sorted(),
                "a description shows the password")
        } catch {
            require(
                !plantedAsPassword(text) || !"\(error)".contains(secret), "a connection string error shows the password"
            )
        }
    }
    return 0
}

/// Whether every occurrence of the secret in `text` stands where a password does (after `password=`,
/// `password='` or a URL's `user:`): elsewhere (a keyword, a host) it is not a password, and may be named.
func plantedAsPassword(_ text: String) -> Bool {
    var found = false
    var rest = text[...]
    while let range = rest.range(of: secret) {
        let before = text[..<range.lowerBound]
        guard before.hasSuffix("password=") || before.hasSuffix("password='") || before.hasSuffix(":") else {
            return false
        }
        found = true
        rest = text[range.upperBound...]
    }
    return found
}

/// `precondition` that says why in an optimized build too (libFuzzer's log keeps the message).
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
