#!/bin/sh
# compose.yaml's profile `managed`: one member of a pg_auto_failover formation, created at the first start and
# run by pg_autoctl from then on.
#   pg-auto-failover monitor              the monitor (its own PostgreSQL, database pg_auto_failover)
#   pg-auto-failover node NAME MONITOR    a node registered with the monitor at MONITOR (a libpq URL); the
#                                         first to register becomes the primary, the next its synchronous
#                                         secondary, built from a base backup
# Trust on the compose network (--pg-hba-lan for the workers' logins) and self-signed TLS: a demo's settings.
# A deployment uses --auth scram-sha-256 with passwords for pg_autoctl's own users, and verified certificates
# (docs/operations.md, Failover managed by pg_auto_failover).
set -eu
host=$(hostname)
case "${1:-}" in
    monitor)
        if [ ! -f "$PGDATA/PG_VERSION" ]; then
            pg_autoctl create monitor --pgdata "$PGDATA" --pgport 5432 --hostname "$host" --auth trust \
                --ssl-self-signed
            # Health checks tightened: a dead primary is replaced in seconds rather than about a minute
            # (docs/scaling.md, Managed failover).
            cat >> "$PGDATA/postgresql.conf" <<CONF
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_retry_delay = 500
pgautofailover.health_check_max_retries = 1
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 3000
CONF
        fi
        exec pg_autoctl run --pgdata "$PGDATA"
        ;;
    node)
        [ $# -eq 3 ] || { echo "usage: pg-auto-failover node NAME MONITOR_URL" >&2; exit 2; }
        if [ -f "$PGDATA/PG_VERSION" ]; then exec pg_autoctl run --pgdata "$PGDATA"; fi
        exec pg_autoctl create postgres --pgdata "$PGDATA" --pgport 5432 --hostname "$host" --name "$2" \
            --monitor "$3" --auth trust --ssl-self-signed --pg-hba-lan --run
        ;;
    *) echo "usage: pg-auto-failover monitor | node NAME MONITOR_URL" >&2; exit 2 ;;
esac
