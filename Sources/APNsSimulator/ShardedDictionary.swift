/// A dictionary split into 64 shards by key hash, so that growing never rehashes more than one shard.
///
/// The simulator keeps a device per token and grows without bound while a benchmark runs. One
/// `Dictionary` rehashes every entry when it grows: at 49,152 tokens the device model's two maps took
/// 36 ms to grow (measured alone), under the recorder lock, and every request of the simulator waited
/// behind it: that second's p99 in the worker benchmark was 67–183 ms, run after run. Shards of a
/// sixty-fourth the size grow at different moments and each rehash is a sixty-fourth as long.
struct ShardedDictionary<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private static var shardBits: Int { 6 }
    private var shards = [[Key: Value]](repeating: [:], count: 1 << Self.shardBits)

    init() {}

    /// The shard: the hash's top bits. (The low bits would put keys alike in the bits each shard's own
    /// table indexes by.)
    private static func shard(_ key: Key) -> Int {
        Int(truncatingIfNeeded: UInt(bitPattern: key.hashValue) >> (UInt.bitWidth - shardBits))
    }

    subscript(key: Key) -> Value? {
        get { shards[Self.shard(key)][key] }
        set { shards[Self.shard(key)][key] = newValue }
    }

    var count: Int { shards.reduce(0) { $0 + $1.count } }

    /// Every key, in no particular order.
    var keys: [Key] { shards.flatMap(\.keys) }
}
