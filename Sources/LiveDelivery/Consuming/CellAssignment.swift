import Foundation

/// The cells of a deployment as every worker is configured with them (`cell.all`, `cells.<name>.weight`,
/// `cells.<name>.queue`), and the one cell each order belongs to: a weighted rendezvous (highest random
/// weight) hash of its `order_id` over the cells' names (docs/scaling.md, "Which cell an order belongs to").
///
/// The function is small and fixed so that a publisher in any language can compute it too; the test vectors
/// in `CellAssignmentTests` pin it. For each cell:
///
/// 1. `h` = FNV-1a 64 over the UTF-8 bytes of `name + "\n" + order_id`, then MurmurHash3's 64-bit finalizer;
/// 2. `u` = (`h >> 11` + 0.5) / 2^53, a double strictly between 0 and 1;
/// 3. `score` = −`weight` / ln(`u`).
///
/// The order belongs to the cell with the highest score; of equal scores, the name first in byte order.
/// Adding a cell moves only the orders the new cell wins (about weight / total weight of them), and a broker
/// restart moves none: nothing of it lives in the broker.
package struct CellAssignment: Sendable, Hashable {
    package struct Cell: Sendable, Hashable {
        package var name: String
        package var weight: Int
        /// The cell's events queue: where an event of its orders that reached another cell is forwarded.
        package var queue: String

        package init(name: String, weight: Int, queue: String) {
            self.name = name
            self.weight = weight
            self.queue = queue
        }
    }

    /// A cell's weight (`cells.<name>.weight`, `cell.weight`).
    package static let weights: ClosedRange<Int> = 1...1000

    /// The cells in byte order of their names (ties go to the first).
    package let cells: [Cell]

    /// `cells` must have distinct names and positive weights (the configuration checks both).
    package init(_ cells: [Cell]) {
        precondition(!cells.isEmpty, "a deployment of cells has at least one")
        self.cells = cells.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    }

    /// The cell `orderID` belongs to.
    package func cell(for orderID: String) -> Cell {
        var best = cells[0]
        var bestScore = -Double.infinity
        for cell in cells {
            let score = Self.score(hash: Self.hash(cell: cell.name, orderID: orderID), weight: cell.weight)
            if score > bestScore {
                best = cell
                bestScore = score
            }
        }
        return best
    }

    /// The cell named `name`, if it is one of the deployment's.
    package func cell(named name: String) -> Cell? { cells.first { $0.name == name } }

    /// FNV-1a 64 of `cell + "\n" + orderID` (UTF-8), then MurmurHash3's `fmix64`.
    package static func hash(cell: String, orderID: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        let prime: UInt64 = 0x0000_0100_0000_01b3
        for byte in cell.utf8 { h = (h ^ UInt64(byte)) &* prime }
        h = (h ^ 0x0A) &* prime
        for byte in orderID.utf8 { h = (h ^ UInt64(byte)) &* prime }
        h ^= h >> 33
        h = h &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h = h &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }

    /// −`weight` / ln(`u`), with `u` = (`hash >> 11` + 0.5) / 2^53 in (0, 1).
    package static func score(hash: UInt64, weight: Int) -> Double {
        let u = (Double(hash >> 11) + 0.5) / 9_007_199_254_740_992.0
        return -Double(weight) / log(u)
    }
}
