-- The roles of LiveDelivery on a server, and its database (docs/operations.md, Roles and privileges).
-- Run once per server by an administrator (a superuser, or on a managed PostgreSQL the provider's admin
-- role with CREATEROLE), before the first `livedelivery migrate`, with the two logins' passwords:
--
--   psql -v ON_ERROR_STOP=1 -v owner_password='…' -v worker_password='…' -f ops/postgres/roles.sql
--
-- It refuses to run without them. compose.yaml runs it at the server's first start (ops/compose/postgres-roles.sh).
--
--   livedelivery_owner      LOGIN: owns the schema; `livedelivery migrate` runs as it (DDL, grants)
--   livedelivery_worker     NOLOGIN: the DML the workers need (granted by the migrations)
--   livedelivery            LOGIN, in livedelivery_worker: what the workers connect as
--   livedelivery_reporting  NOLOGIN: the report views and functions (granted by the migrations);
--                           BI tools get logins of their own in it
\set ON_ERROR_STOP on
\if :{?owner_password}
\else
\set owner_password ''
\endif
\if :{?worker_password}
\else
\set worker_password ''
\endif
SELECT :'owner_password' = '' OR :'worker_password' = '' AS missing_password \gset
\if :missing_password
\warn 'roles.sql: give both passwords: psql -v owner_password=… -v worker_password=… -f roles.sql'
DO $$ BEGIN RAISE EXCEPTION 'roles.sql: owner_password and worker_password are required'; END $$;
\endif
CREATE ROLE livedelivery_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE livedelivery_worker NOLOGIN;
CREATE ROLE livedelivery_reporting NOLOGIN;
CREATE ROLE livedelivery LOGIN PASSWORD :'worker_password' IN ROLE livedelivery_worker;
CREATE DATABASE livedelivery OWNER livedelivery_owner;
