import LiveDelivery
import Testing

/// The hash that gives each order its cell (docs/scaling.md, "Which cell an order belongs to"): these vectors
/// are what a publisher in another language checks its implementation against. They were computed by an
/// independent implementation (a few lines of Python, in the document) and must never change: changing the
/// function moves orders in flight to other cells.
@Suite("Cells: the rendezvous hash")
struct CellAssignmentTests {
    static func assignment(_ cells: [(String, Int)]) -> CellAssignment {
        CellAssignment(cells.map { CellAssignment.Cell(name: $0.0, weight: $0.1, queue: "q-\($0.0)") })
    }

    @Test("FNV-1a 64 of cell + \"\\n\" + order_id, then MurmurHash3's fmix64")
    func hashVectors() {
        #expect(CellAssignment.hash(cell: "a", orderID: "order-1") == 0x1ede_21de_6c72_d65c)
        #expect(CellAssignment.hash(cell: "b", orderID: "order-1") == 0x3add_19e5_325a_b530)
        #expect(CellAssignment.hash(cell: "eu-1", orderID: "A-10001") == 0x45dd_657a_2f80_999b)
        #expect(CellAssignment.hash(cell: "a", orderID: "") == 0x24cc_86b5_62dc_e8f9)
    }

    static let ids = (1...16).map { "order-\($0)" } + ["A-10001", "pedido-ñ-7", ""]

    @Test(
        "each id's cell, for equal and unequal weights",
        arguments: [
            ([("a", 1), ("b", 1)], "b a b a b b b a b a a b b b a b b b b"),
            ([("a", 1), ("b", 1), ("c", 1)], "c a c a c c c a b a a b b b a b b b b"),
            ([("a", 1), ("b", 3)], "b b b a b b b b b b b b b b b b b b b"),
            (
                [("eu-1", 2), ("eu-2", 1), ("us-1", 5)],
                "us-1 us-1 us-1 eu-1 us-1 eu-1 us-1 us-1 eu-2 us-1 us-1 us-1 eu-2 eu-2 us-1 us-1 us-1 us-1 us-1"
            ),
        ])
    func assignmentVectors(_ cells: [(String, Int)], _ expected: String) {
        let assignment = Self.assignment(cells)
        #expect(Self.ids.map { assignment.cell(for: $0).name }.joined(separator: " ") == expected)
        // The order the cells are listed in changes nothing.
        let reversed = Self.assignment(cells.reversed())
        #expect(Self.ids.map { reversed.cell(for: $0).name }.joined(separator: " ") == expected)
    }

    @Test("adding a cell moves only the orders it takes, about 1/(N+1) of them; shares follow the weights")
    func addingACellMovesItsShareOnly() {
        let two = Self.assignment([("a", 1), ("b", 1)])
        let three = Self.assignment([("a", 1), ("b", 1), ("c", 1)])
        let ids = (0..<6000).map { "o-\($0)" }
        var moved = 0
        for id in ids where two.cell(for: id).name != three.cell(for: id).name {
            #expect(three.cell(for: id).name == "c", "\(id) moved between the old cells")
            moved += 1
        }
        #expect((1800...2200).contains(moved), "\(moved) of 6000 moved")
        let weighted = Self.assignment([("a", 1), ("b", 3)])
        let inA = ids.filter { weighted.cell(for: $0).name == "a" }.count
        #expect((1300...1700).contains(inA), "\(inA) of 6000 in a (weight 1 of 4)")
    }
}
