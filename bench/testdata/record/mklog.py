#!/usr/bin/env python3
"""Writes a long service log of the kind an agent tails: a dev stack that
waits for its database (one identical line per retry), a webpack build
with the same warning for many modules, coloured level names, thousands of
timestamped access-log lines (all distinct), the same Java-style stack
trace for every failing request (a repeated block, not repeated lines),
and a final error. Deterministic (seeded).

    mklog.py > service-log.raw
"""
import datetime
import random
import sys

rng = random.Random(42)
w = sys.stdout.write
t = datetime.datetime(2025, 3, 14, 9, 26, 53, 120000)
C = {"INFO": "\x1b[32mINFO\x1b[0m", "WARN": "\x1b[33mWARN\x1b[0m", "ERROR": "\x1b[1;31mERROR\x1b[0m", "DEBUG": "\x1b[2mDEBUG\x1b[0m"}


def ts(step_ms=None):
    global t
    t += datetime.timedelta(milliseconds=step_ms if step_ms is not None else rng.randint(1, 120))
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def log(level, logger, msg):
    w(f"{ts()} {C[level]} [{logger}] {msg}\n")


w("\x1b[1mapi-1  |\x1b[0m Starting orders-api 3.18.2 (commit 9f3c2e1, go1.22.1)\n")
log("INFO", "config", "loaded /etc/orders/config.yaml (env=staging, region=eu-west-1)")
log("INFO", "db", "connecting to postgres://orders@db:5432/orders (pool max=20)")
# A wait-for-db loop: the same line every second.
for _ in range(420):
    w("db is unavailable - sleeping\n")
log("INFO", "db", "connected after 420 attempts; running migrations")
for i in range(1, 41):
    log("INFO", "migrate", f"applied {20240100 + i:08d}_{rng.choice(['add','drop','alter'])}_{rng.choice(['orders','items','users','invoices'])}.sql in {rng.randint(2, 300)}ms")
# A webpack build for the admin UI, with the same warning for many modules.
w("\x1b[1mweb-1  |\x1b[0m <i> [webpack-dev-server] Project is running at:\n")
w("\x1b[1mweb-1  |\x1b[0m <i> [webpack-dev-server] Loopback: http://localhost:8080/\n")
for i in range(600):
    w("\x1b[33mWARNING\x1b[39m in ./node_modules/chart.js/dist/chart.esm.js\n")
    w("Module Warning (from ./node_modules/source-map-loader/dist/cjs.js):\n")
    w("Failed to parse source map: 'webpack://' URL is not supported\n")
    w("\n")
w("webpack 5.88.2 compiled with \x1b[33m600 warnings\x1b[39m in 18342 ms\n")
# Access log: all lines distinct (timestamps, ids, latencies).
paths = ["/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/items?page={p}", "/healthz", "/api/v1/users/{id}/cart", "/metrics"]
trace = [
    "java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, request timed out after 30000ms.",
    "\tat com.zaxxer.hikari.pool.HikariPool.createTimeoutException(HikariPool.java:696)",
    "\tat com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:181)",
    "\tat com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:146)",
    "\tat com.zaxxer.hikari.HikariDataSource.getConnection(HikariDataSource.java:100)",
    "\tat com.example.orders.repo.OrderRepository.find(OrderRepository.java:88)",
    "\tat com.example.orders.api.OrderController.get(OrderController.java:41)",
    "\t... 57 common frames omitted",
]
for i in range(9000):
    p = rng.choice(paths).format(id=rng.randint(1000, 99999), p=rng.randint(1, 40))
    status = 200 if rng.random() > 0.02 else rng.choice([404, 500, 503])
    if p == "/healthz" and rng.random() < 0.5:
        # A burst of health checks within the same millisecond: identical.
        line = f"{ts(0)} {C['DEBUG']} [http] GET /healthz 200 0ms"
        for _ in range(rng.randint(2, 6)):
            w(line + "\n")
        continue
    log("INFO" if status < 500 else "ERROR", "http", f"{rng.choice(['GET','GET','POST','PUT'])} {p} {status} {rng.randint(1, 900)}ms req_id={rng.getrandbits(48):012x}")
    if status >= 500:
        for l in trace:
            w(l + "\n")
    if i % 1500 == 1499:
        # A retry loop that logs the same line between other lines.
        for _ in range(25):
            log("WARN", "kafka", "broker kafka-2:9092 not reachable; retrying in 5s")
            w("Retrying in 5 seconds...\n")
log("ERROR", "http", "connection pool exhausted (20/20 in use, 148 waiting); shedding load")
log("ERROR", "main", "health check failed 3 times in a row; exiting with status 1")
w("\x1b[1mapi-1  |\x1b[0m orders-api exited with code 1\n")
