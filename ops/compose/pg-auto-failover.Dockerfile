# compose.yaml's profile `managed`: PostgreSQL 15 with pg_auto_failover (pg_autoctl), from the PostgreSQL
# image's own apt repository. One image for the monitor and the nodes (ops/compose/pg-auto-failover.sh says
# which a container is). openssl: pg_autoctl makes its self-signed certificates (--ssl-self-signed) with it.
FROM postgres:15
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        postgresql-15-auto-failover openssl && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/pgaf && chown postgres:postgres /var/lib/postgresql/pgaf
COPY pg-auto-failover.sh /usr/local/bin/pg-auto-failover
# pg_autoctl refuses to run as root. Its configuration and state live on the volume with the data, so a
# recreated container is the same node.
USER postgres
ENV PGDATA=/var/lib/postgresql/pgaf/data XDG_CONFIG_HOME=/var/lib/postgresql/pgaf/config \
    XDG_DATA_HOME=/var/lib/postgresql/pgaf/share
ENTRYPOINT ["pg-auto-failover"]
