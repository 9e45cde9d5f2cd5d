import Foundation  // linked for the modules below, which use it
import LiveDeliveryCore
import LiveDeliveryJSON

// libFuzzer's target for what a publisher sends: any bytes, as a message body.
//
// - The event decoder never crashes or hangs, whatever it gets.
// - An event it accepts holds no text PostgreSQL cannot store (U+0000).
// - JSON the tape parses serializes to JSON that parses again, and serializes to the same bytes.
//
// Built and run by scripts/fuzz (swiftc -sanitize=fuzzer,address); seeds in Tests/Fuzz/corpus/event-decoder.

/// libFuzzer's entry point: one input, any bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if case .success(let event) = EventDecoder.decode(bytes) {
        require(!holdsNUL(event), "an accepted event holds U+0000")
    }
    if let value = JSONValue.parse(bytes) {
        // A number keeps its value, not always its case: a double that is a whole number past 2^53 is
        // written with an exponent, which reads back as an integer when one holds it (as JSONDecoder
        // reads it). After one round the bytes are stable.
        guard let again = JSONValue.parse(value.serialized()) else { fatalError("serialized JSON does not parse") }
        require(sameNumbers(value, again), "JSON does not keep its values through serializing")
        let twice = again.serialized()
        require(JSONValue.parse(twice)?.serialized() == twice, "JSON does not serialize to the same bytes")
    }
    return 0
}

/// Equal, a number to a number of the same value whatever its case.
func sameNumbers(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Double(x) == y
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(sameNumbers)
    case (.object(let x), .object(let y)):
        return x.members.count == y.members.count
            && zip(x.members, y.members).allSatisfy { $0.key == $1.key && sameNumbers($0.value, $1.value) }
    default: return a == b
    }
}

/// Whether any text inside `value` holds U+0000.
func holdsNUL(_ value: Any) -> Bool {
    if let text = value as? String { return text.utf8.contains(0) }
    return Mirror(reflecting: value).children.contains { holdsNUL($0.value) }
}

/// `precondition` that says why in an optimized build too (libFuzzer's log keeps the message).
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
