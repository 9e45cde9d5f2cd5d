package import Postgres

/// Whether the worker's database login can do more than its job (docs/operations.md, Roles and privileges).
///
/// The worker needs the DML that sql/117 grants to `livedelivery_worker`. A superuser, or the owner of
/// the schema (or a member of it), can also create, alter and drop: a bug or a stolen password then
/// reaches the schema itself. The worker says so when it starts, and `check-config --connect` with it;
/// neither refuses to run, since a first try on a laptop often uses one login for everything.
package struct LoginPrivileges: Sendable, Equatable {
    /// The login the connection runs as.
    package var login: String
    package var isSuperuser: Bool
    /// The login owns the worker's tables, or is a member of the role that does.
    package var ownsSchema: Bool

    package init(login: String, isSuperuser: Bool, ownsSchema: Bool) {
        self.login = login
        self.isSuperuser = isSuperuser
        self.ownsSchema = ownsSchema
    }

    /// A sentence for the operator when the login has more than the worker needs; nil when it has not.
    package var warning: String? {
        let what =
            isSuperuser ? "a superuser" : ownsSchema ? "the owner of the schema (it may create, alter and drop)" : nil
        return what.map {
            "the database login \(login) is \($0): give the worker a login in role livedelivery_worker, "
                + "and keep the owner's for `livedelivery migrate` (docs/operations.md, Roles and privileges)"
        }
    }

    /// Reads the current login's role on `client`'s database.
    package static func read(_ client: PostgresClient) async throws -> LoginPrivileges {
        let row = try await client.query(
            """
            SELECT r.rolname::text AS login, r.rolsuper AS superuser,
                   coalesce(pg_has_role(current_user, c.relowner, 'USAGE'), false) AS owner
            FROM pg_catalog.pg_roles AS r
            LEFT JOIN pg_catalog.pg_class AS c ON c.oid = to_regclass('orders')
            WHERE r.rolname = current_user
            """
        )[0]
        return LoginPrivileges(
            login: try row.decode(String.self, "login"), isSuperuser: try row.decode(Bool.self, "superuser"),
            ownsSchema: try row.decode(Bool.self, "owner"))
    }
}
