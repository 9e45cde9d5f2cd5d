import Testing
@testable import Postgres

@Test func PostgresModuleLinks() {}
