/// The newest `limit` elements, oldest first, kept in fixed-size chunks so that appending never copies
/// what is already kept.
///
/// The simulator's records were one array used as a ring: each time it doubled, every record (a few
/// hundred bytes each) was copied under the recorder lock while every request waited. A chunk is
/// allocated once, filled, and freed whole once every element in it is older than the newest `limit`;
/// memory stays below `limit` plus one chunk.
struct RecordRing<Element: Sendable>: Sendable {
    let limit: Int
    private let chunkSize: Int
    private var chunks: [[Element]] = []
    /// Elements at the front of `chunks[0]` that are no longer kept.
    private var dropped = 0
    private(set) var count = 0

    init(limit: Int) {
        self.limit = max(1, limit)
        chunkSize = min(4096, self.limit)
    }

    mutating func append(_ element: Element) {
        if chunks.isEmpty || chunks[chunks.count - 1].count == chunkSize {
            var chunk: [Element] = []
            chunk.reserveCapacity(chunkSize)
            chunks.append(chunk)
        }
        chunks[chunks.count - 1].append(element)
        count += 1
        guard count > limit else { return }
        count -= 1
        dropped += 1
        if dropped == chunks[0].count {
            chunks.removeFirst()
            dropped = 0
        }
    }

    /// The kept elements at the end for which `isNewer` holds, oldest first: a walk back from the newest
    /// that stops at the first element it rejects, so reading what arrived since the last read costs what
    /// arrived, not what is kept.
    func suffix(while isNewer: (Element) -> Bool) -> [Element] {
        var newest: [Element] = []
        for chunkIndex in chunks.indices.reversed() {
            let chunk = chunks[chunkIndex]
            let start = chunkIndex == 0 ? dropped : 0
            for index in stride(from: chunk.count - 1, through: start, by: -1) {
                guard isNewer(chunk[index]) else { return newest.reversed() }
                newest.append(chunk[index])
            }
        }
        return newest.reversed()
    }

    /// The kept elements, oldest first.
    var elements: [Element] {
        guard let first = chunks.first else { return [] }
        var all = Array(first[dropped...])
        all.reserveCapacity(count)
        for chunk in chunks.dropFirst() { all += chunk }
        return all
    }
}
