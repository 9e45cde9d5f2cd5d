-- The roles of LiveDelivery on a server, and its database (docs/operations.md, Roles and privileges).
-- Run once per server by an administrator (a superuser, or on a managed PostgreSQL the provider's admin
-- role with CREATEROLE), before the first `livedelivery migrate`. compose.yaml runs it at the server's
-- first start. Change the passwords: these are the compose demo's, for containers on a private network.
--
--   livedelivery_owner      LOGIN: owns the schema; `livedelivery migrate` runs as it (DDL, grants)
--   livedelivery_worker     NOLOGIN: the DML the workers need (granted by the migrations)
--   livedelivery            LOGIN, in livedelivery_worker: what the workers connect as
--   livedelivery_reporting  NOLOGIN: the report views and functions (granted by the migrations);
--                           BI tools get logins of their own in it
CREATE ROLE livedelivery_owner LOGIN PASSWORD 'livedelivery_owner';
CREATE ROLE livedelivery_worker NOLOGIN;
CREATE ROLE livedelivery_reporting NOLOGIN;
CREATE ROLE livedelivery LOGIN PASSWORD 'livedelivery' IN ROLE livedelivery_worker;
CREATE DATABASE livedelivery OWNER livedelivery_owner;
