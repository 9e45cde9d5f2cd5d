#!/bin/sh
# compose.yaml's roles: ops/postgres/roles.sql, at the server's first start (the postgres image runs the
# /docker-entrypoint-initdb.d/*.sh files), with the demo's passwords from the service's environment.
psql -v ON_ERROR_STOP=1 -q -X --username "${POSTGRES_USER:-postgres}" --dbname postgres \
    -v owner_password="$LIVEDELIVERY_OWNER_PASSWORD" -v worker_password="$LIVEDELIVERY_WORKER_PASSWORD" \
    -f /etc/livedelivery/roles.sql || exit 1
