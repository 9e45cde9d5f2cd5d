import APNs
import Foundation  // linked for the modules below, which use it
import Postgres

// libFuzzer's target for what the servers send back: the first byte picks the reader.
//
// - 0: an APNs answer (two bytes of status, a retry-after byte, the rest its body) classified as the
//   client does: never a crash; 200 is always delivered; any other status never is; a retry-after
//   becomes the delay of a retry.
// - 1: a PostgreSQL text value decoded as every type the worker reads: never a crash, and a refusal
//   never quotes the value (it may be a token or a payload).
//
// Built and run by scripts/fuzz; seeds in Tests/Fuzz/corpus/answers.

/// libFuzzer's entry point: one input, any bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAnswers(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] % 2 == 0 {
        classify(bytes)
    } else {
        decodeCells(String(decoding: bytes, as: UTF8.self))
    }
    return 0
}

func classify(_ bytes: [UInt8]) {
    guard bytes.count >= 3 else { return }
    let status = Int(bytes[0]) << 8 | Int(bytes[1])
    let retryAfter: Duration? = bytes[2] == 0 ? nil : .seconds(Int(bytes[2]))
    let apnsID = UUID()
    let outcome = APNsOutcome.classify(
        status: status, body: Array(bytes.dropFirst(3)), apnsID: apnsID, retryAfter: retryAfter,
        delays: APNsRetryDelays())
    if status == 200 {
        require(outcome == .delivered(apnsID: apnsID), "200 is not delivered")
    } else if case .delivered = outcome {
        fatalError("status \(status) classified as delivered")
    }
    if let retryAfter, case .retryLater(_, _, let after) = outcome, status == 429 || status >= 500 {
        require(after == retryAfter, "APNs' retry-after is not the delay")
    }
}

func decodeCells(_ text: String) {
    let types: [PostgresDataType] = [.text, .int8, .int4, .int2, .float8, .bool, .bytea, .json, .unknown]
    for type in types {
        let cell = PostgresCell(columnName: "c", columnIndex: 0, dataType: type, text: text)
        check(text) { try String.decode(from: cell) }
        check(text) { try Int.decode(from: cell) }
        check(text) { try Int64.decode(from: cell) }
        check(text) { try Int32.decode(from: cell) }
        check(text) { try Int16.decode(from: cell) }
        check(text) { try Double.decode(from: cell) }
        check(text) { try Bool.decode(from: cell) }
        check(text) { try Date.decode(from: cell) }
        check(text) { try UUID.decode(from: cell) }
        check(text) { try [UInt8].decode(from: cell) }
        check(text) { try Data.decode(from: cell) }
        check(text) { try PostgresJSON.decode(from: cell) }
    }
}

func check<Value>(_ text: String, _ decode: () throws -> Value) {
    do { _ = try decode() } catch {
        // A value of a few characters may be a word of the message itself; a longer one must not appear.
        // Compared byte for byte: Foundation's `contains` passes over NULs, so "x)" and NULs would match
        // the "hex)" of a message.
        require(text.utf8.count < 12 || !quotes("\(error)", text), "a decoding error quotes the value")
    }
}

/// Whether `message` holds `value`'s bytes in a row.
func quotes(_ message: String, _ value: String) -> Bool {
    let message = Array(message.utf8)
    let value = Array(value.utf8)
    guard !value.isEmpty, value.count <= message.count else { return value.isEmpty }
    return (0...(message.count - value.count)).contains { message[$0..<($0 + value.count)].elementsEqual(value) }
}

/// `precondition` that says why in an optimized build too (libFuzzer's log keeps the message).
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
