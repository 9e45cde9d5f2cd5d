import Foundation
import LiveDelivery
import TestSupport
import Testing

/// The list of cells every worker of a deployment of cells is configured with (`cell.all`,
/// `cells.<name>.queue`, `cells.<name>.weight`), checked at start with every problem named.
@Suite("Configuration: the list of cells")
struct CellsConfigurationTests {
    func load(_ settings: [String: String]) async throws -> Result<WorkerConfiguration, LiveDeliveryError> {
        let folder = try ConfigurationTests().folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let environment =
            [
                "LIVEDELIVERY_CONFIG_DIR": folder.path, "LIVEDELIVERY_AMQP_URL": "amqp://u:p@h/%2F",
                "LIVEDELIVERY_POSTGRES_URL": "postgresql://u@h/d", "LIVEDELIVERY_AMQP_QUEUE": "events-a",
            ].merging(settings) { $1 }
        let reader = try await WorkerConfiguration.makeReader(environment: environment)
        do {
            return .success(try WorkerConfiguration.load(config: reader))
        } catch {
            return .failure(error)
        }
    }

    @Test("a valid list: this cell's queue and weight from amqp.queue and cell.weight, the others' from cells.<name>")
    func valid() async throws {
        let configuration = try await load([
            "LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_WEIGHT": "2", "LIVEDELIVERY_CELL_ALL": "b, a,eu-1",
            "LIVEDELIVERY_CELLS_B_QUEUE": "events-b", "LIVEDELIVERY_CELLS_B_WEIGHT": "3",
            "LIVEDELIVERY_CELLS_EU_1_QUEUE": "events-eu-1",
        ]).get()
        let cells = try #require(configuration.amqp.cells)
        #expect(
            cells.cells == [
                .init(name: "a", weight: 2, queue: "events-a"), .init(name: "b", weight: 3, queue: "events-b"),
                .init(name: "eu-1", weight: 1, queue: "events-eu-1"),
            ])
        #expect(configuration.summary.contains("cell.all: a, b, eu-1"))
        #expect(configuration.summary.contains("cells.<name>.queue: a events-a, b events-b, eu-1 events-eu-1"))
        #expect(configuration.summary.contains("cells.<name>.weight: a 2, b 3, eu-1 1"))
    }

    @Test("without the list, nothing changes: no hash, no forwarding")
    func unset() async throws {
        let configuration = try await load(["LIVEDELIVERY_CELL_NAME": "a"]).get()
        #expect(configuration.amqp.cells == nil)
        #expect(configuration.summary.contains("cell.all: none"))
    }

    @Test(
        "every problem of the list is named, with its key and environment variable",
        arguments: [
            (["LIVEDELIVERY_CELL_ALL": "a,b"], "cell.all (environment LIVEDELIVERY_CELL_ALL) needs cell.name"),
            (
                ["LIVEDELIVERY_CELL_NAME": "c", "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_A_QUEUE": "qa"],
                "must name this worker's own cell, c"
            ),
            (["LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,B_2"], "\"B_2\" is not a cell name"),
            (["LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,a"], "a is listed twice"),
            (
                ["LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,b"],
                "cells.b.queue (environment LIVEDELIVERY_CELLS_B_QUEUE) is required"
            ),
            (
                [
                    "LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,b",
                    "LIVEDELIVERY_CELLS_B_QUEUE": "events-a",
                ],
                "each cell has a queue of its own"
            ),
            (
                [
                    "LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_B_QUEUE": "qb",
                    "LIVEDELIVERY_CELLS_B_WEIGHT": "0",
                ],
                "cells.b.weight (environment LIVEDELIVERY_CELLS_B_WEIGHT) must be between 1 and 1000 (is 0)"
            ),
            (
                [
                    "LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_B_QUEUE": "qb",
                    "LIVEDELIVERY_CELLS_A_QUEUE": "other",
                ],
                "but this cell's queue (amqp.queue) is events-a"
            ),
            (
                [
                    "LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_B_QUEUE": "qb",
                    "LIVEDELIVERY_CELLS_A_WEIGHT": "2", "LIVEDELIVERY_CELL_WEIGHT": "3",
                ],
                "cells.a.weight (environment LIVEDELIVERY_CELLS_A_WEIGHT) is 2, but cell.weight is 3"
            ),
        ])
    func invalid(_ settings: [String: String], _ expected: String) async throws {
        guard case .failure(let error) = try await load(settings) else {
            Issue.record("accepted \(settings)")
            return
        }
        #expect(error.problems.contains { $0.contains(expected) }, "\(error.problems)")
    }

    @Test("a cell added to the deployment names the cells it takes orders over from, each with its database")
    func takeOverFrom() async throws {
        let configuration = try await load([
            "LIVEDELIVERY_CELL_NAME": "c", "LIVEDELIVERY_CELL_ALL": "a,b,c", "LIVEDELIVERY_AMQP_QUEUE": "events-c",
            "LIVEDELIVERY_CELLS_A_QUEUE": "events-a", "LIVEDELIVERY_CELLS_B_QUEUE": "events-b",
            "LIVEDELIVERY_CELL_TAKE_OVER_FROM": "a, b",
            "LIVEDELIVERY_CELLS_A_POSTGRES_URL": "postgresql://w:secret-a@db-a/livedelivery",
            "LIVEDELIVERY_CELLS_B_POSTGRES_URL": "postgresql://w:secret-b@db-b/livedelivery",
        ]).get()
        #expect(configuration.summary.contains("cell.takeOverFrom: a, b"))
        #expect(!configuration.summary.contains("secret-a") && !configuration.summary.contains("secret-b"))
        // Their links are checked as the worker's own database link is, and warned about at start.
        let findings = LinkFinding.findings(configuration).map(\.message)
        #expect(
            findings.contains {
                $0.contains("the cell b database (cells.b.postgresUrl) link may fall back to plain text")
            })
        #expect(!findings.joined().contains("secret-"))
    }

    @Test(
        "every problem of cell.takeOverFrom is named, never a password",
        arguments: [
            (
                ["LIVEDELIVERY_CELL_TAKE_OVER_FROM": "b"],
                "cell.takeOverFrom (environment LIVEDELIVERY_CELL_TAKE_OVER_FROM) needs cell.all"
            ),
            (["LIVEDELIVERY_CELL_TAKE_OVER_FROM": "c"], "\"c\" is not another cell of cell.all"),
            (["LIVEDELIVERY_CELL_TAKE_OVER_FROM": "d"], "\"d\" is not another cell of cell.all"),
            (["LIVEDELIVERY_CELL_TAKE_OVER_FROM": "a"], "cells.a.postgresUrl is required"),
            (
                [
                    "LIVEDELIVERY_CELL_TAKE_OVER_FROM": "a",
                    "LIVEDELIVERY_CELLS_A_POSTGRES_URL": "host=db password=secret-a =",
                ],
                "the database of cell a"
            ),
        ])
    func takeOverFromInvalid(_ settings: [String: String], _ expected: String) async throws {
        var environment = settings
        if settings["LIVEDELIVERY_CELL_TAKE_OVER_FROM"] != "b" {
            environment.merge([
                "LIVEDELIVERY_CELL_NAME": "c", "LIVEDELIVERY_CELL_ALL": "a,c", "LIVEDELIVERY_AMQP_QUEUE": "events-c",
                "LIVEDELIVERY_CELLS_A_QUEUE": "events-a",
            ]) { $1 }
        }
        guard case .failure(let error) = try await load(environment) else {
            Issue.record("accepted \(settings)")
            return
        }
        #expect(error.problems.contains { $0.contains(expected) }, "\(error.problems)")
        #expect(!error.problems.joined().contains("secret-a"))
    }
}
