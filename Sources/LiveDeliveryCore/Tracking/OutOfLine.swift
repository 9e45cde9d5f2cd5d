/// A value kept on the heap, compared and hashed by value: for the fields few orders have (followers, a
/// broadcast channel), so that the states of all the others carry one nil reference for them rather than the
/// fields themselves, copied and retained with every copy of every state. `nil` costs nothing to copy.
package final class OutOfLine<Value: Hashable & Sendable>: Hashable, Sendable {
    package let value: Value

    package init(_ value: Value) { self.value = value }

    package static func == (lhs: OutOfLine, rhs: OutOfLine) -> Bool { lhs === rhs || lhs.value == rhs.value }
    package func hash(into hasher: inout Hasher) { hasher.combine(value) }
}
