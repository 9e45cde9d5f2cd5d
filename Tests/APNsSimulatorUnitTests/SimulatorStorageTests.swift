import Foundation
import Testing

@testable import APNsSimulator

@Suite("apns-sim's storage: records and devices that grow without stalling")
struct SimulatorStorageTests {
    @Test(arguments: [1, 3, 4096, 5000, 10_000])
    func theRingKeepsTheNewestRecordsOldestFirst(limit: Int) {
        var ring = RecordRing<Int>(limit: limit)
        #expect(ring.elements.isEmpty)
        // Enough appends to fill the ring, drop whole chunks and stop part-way into one.
        let total = limit * 3 + 1234
        for value in 0..<total {
            ring.append(value)
            let expectedCount = min(value + 1, limit)
            if ring.count != expectedCount {
                Issue.record("after \(value + 1) appends: count \(ring.count), expected \(expectedCount)")
                return
            }
        }
        #expect(ring.elements == Array((total - limit)..<total))
        // What arrived after a point, read from the end: across chunks, from inside the oldest chunk,
        // nothing new, and a point older than everything kept.
        for after in [total - 1, total - 2, total - min(limit, 4100), total - limit - 1, -1] {
            #expect(ring.suffix { $0 > after } == Array(max(after + 1, total - limit)..<total), "after \(after)")
        }
    }

    @Test func theRingBelowItsLimitKeepsEverything() {
        var ring = RecordRing<String>(limit: 100_000)
        for value in 0..<9000 { ring.append("r\(value)") }
        #expect(ring.elements == (0..<9000).map { "r\($0)" })
    }

    @Test func theShardedDictionaryActsAsOneDictionary() {
        var sharded = ShardedDictionary<String, Int>()
        var plain: [String: Int] = [:]
        for value in 0..<20_000 {
            let key = String(format: "%064x", value &* 2_654_435_761)
            sharded[key] = value
            plain[key] = value
        }
        // Replace some, remove some, and mutate in place through the optional-chaining setter.
        for value in stride(from: 0, to: 20_000, by: 3) {
            let key = String(format: "%064x", value &* 2_654_435_761)
            if value % 2 == 0 {
                sharded[key] = nil
                plain[key] = nil
            } else {
                sharded[key]? += 1
                plain[key]? += 1
            }
        }
        #expect(sharded.count == plain.count)
        #expect(Set(sharded.keys) == Set(plain.keys))
        #expect(sharded.keys.count == plain.count)
        for (key, value) in plain where sharded[key] != value {
            Issue.record("\(key): \(String(describing: sharded[key])), expected \(value)")
            break
        }
        #expect(sharded["absent"] == nil)
    }
}
