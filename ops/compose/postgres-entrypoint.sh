#!/bin/sh
# What the official postgres image's entry point does for compose.yaml, on Debian's PostgreSQL 15.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    password=$(mktemp)
    printf '%s' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$password"
    initdb -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile="$password" --auth-local=trust \
        --auth-host=scram-sha-256 >/dev/null
    rm -f "$password"
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    for file in /docker-entrypoint-initdb.d/*.sql; do
        [ -f "$file" ] || continue
        echo "postgres-entrypoint: running $file"
        psql -v ON_ERROR_STOP=1 -q -U "${POSTGRES_USER:-postgres}" -d postgres -f "$file"
    done
    for file in /docker-entrypoint-initdb.d/*.sh; do
        [ -f "$file" ] || continue
        echo "postgres-entrypoint: running $file"
        sh "$file"
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA"
