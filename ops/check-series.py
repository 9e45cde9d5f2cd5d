#!/usr/bin/env python3
"""Checks that the dashboard and the rules use only the series the workers export.

    python3 ops/check-series.py [--dashboard FILE] [--rules FILE]

Reads every PromQL expression of the Grafana dashboard (the panels' `expr` fields and the template
variables' queries) and of the rules file (every `expr:`), extracts the metric names they select, and fails
listing each name that is neither in CONTRACT below nor a recording rule the rules file defines. A panel or
an alert built on a misspelt or never-exported series shows "No data" or never fires, silently; this makes
it a test failure instead.

Python 3 standard library only, so the rules file (YAML) is read line by line: `expr:` may be a plain or
single-quoted scalar on one line, or a block scalar (`|`, `>`, with `-` or `+`), as promtool accepts them.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The series the workers export: the contract between the Swift code and ops/. Change both together.
COUNTERS = {
    "livedelivery_events_total",  # {type,outcome}
    "livedelivery_pushes_total",  # {app,kind,outcome,reason}
    "livedelivery_dead_letters_total",  # {reason}
    "livedelivery_sweeps_total",  # {reason}
    "livedelivery_limits_total",  # {limit}
    "livedelivery_paused_apps_total",  # {app,reason}
    "livedelivery_database_unavailable_total",  # {component}
    "livedelivery_events_forwarded_total",  # {to}
}
HISTOGRAMS = {  # exported as NAME_bucket, NAME_sum and NAME_count
    "livedelivery_push_latency_seconds",  # {app}
    "livedelivery_batch_seconds",
    "livedelivery_event_age_at_push_seconds",  # {app}
}
GAUGES = {
    # Per worker process.
    "livedelivery_pushes_in_flight",
    "livedelivery_db_pool_connections",  # {state}: in_use, idle
    "livedelivery_db_pool_waiters",
    "livedelivery_build_info",  # {version,revision}, always 1
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_open_fds",
    "process_start_time_seconds",
    # Sampled from the database and the broker by every worker: aggregate with max, never sum.
    "livedelivery_pushes_pending",  # {app}
    "livedelivery_push_oldest_due_age_seconds",  # {app}
    "livedelivery_apps_paused",  # {app}
    "livedelivery_queue_messages",  # {queue,role}
    "livedelivery_queue_consumers",  # {queue,role}
}
PROMETHEUS = {"up"}  # written by Prometheus for every target

CONTRACT = (
    COUNTERS
    | GAUGES
    | PROMETHEUS
    | {h + suffix for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")}
)

# Words of PromQL that are not metric names: aggregations, operators, modifiers, literals.
KEYWORDS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "atan2", "bool", "offset", "inf", "nan",
}

TOKEN = re.compile(
    r"""
      (?P<comment>\#[^\n]*)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    | (?P<number>(?:0[xX][0-9a-fA-F]+|\d[\w.]*(?:[eE][+-]?\d+)?))
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
# Grafana's variables: $var, ${var}, ${var:format}, [[var]].
GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")


def metric_names(expr):
    """The metric names an expression selects."""
    expr = GRAFANA_VARIABLE.sub("1", expr)
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr)]
    names = set()
    # A name given as a label matcher, {__name__="…"}; a pattern cannot be checked, so it is reported.
    for m in re.finditer(r"""__name__\s*(=~|!=|!~|=)\s*("[^"]*"|'[^']*')""", expr):
        names.add(m.group(2)[1:-1] if m.group(1) == "=" else f"__name__{m.group(1)}{m.group(2)}")
    depth_braces = 0  # inside {…}: label matchers
    depth_brackets = 0  # inside […]: ranges and subqueries' durations
    skip_group = False  # the (…) after by/without/on/ignoring/group_left/group_right holds labels
    in_group = 0
    for i, (kind, text) in enumerate(tokens):
        if kind == "other":
            if text == "{":
                depth_braces += 1
            elif text == "}":
                depth_braces -= 1
            elif text == "[":
                depth_brackets += 1
            elif text == "]":
                depth_brackets -= 1
            elif text == "(":
                if skip_group:
                    in_group, skip_group = 1, False
                elif in_group:
                    in_group += 1
            elif text == ")" and in_group:
                in_group -= 1
            continue
        if kind != "ident" or depth_braces or depth_brackets or in_group:
            continue
        word = text.lower()
        if word in ("by", "without", "on", "ignoring", "group_left", "group_right"):
            skip_group = True
            continue
        following = next((t for k, t in tokens[i + 1:] if not t.isspace()), "")
        if following == "(" or word in KEYWORDS:
            continue  # a function (also @ start() and end()), an aggregation or a keyword
        names.add(text)
    return names


def variable_query_expr(query):
    """The PromQL inside a Grafana Prometheus variable query, or None for queries that select no metric."""
    query = query.strip()
    m = re.fullmatch(r"label_values\((.*),\s*[A-Za-z_]\w*\s*\)", query, re.DOTALL)
    if m:
        return m.group(1)
    if re.fullmatch(r"label_values\(\s*[A-Za-z_]\w*\s*\)|label_names\(\s*\)", query):
        return None
    m = re.fullmatch(r"query_result\((.*)\)", query, re.DOTALL)
    if m:
        return m.group(1)
    return query


def dashboard_expressions(path):
    dashboard = json.loads(path.read_text())
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            title = node.get("title", where)
            if isinstance(node.get("expr"), str) and node["expr"].strip():
                found.append((f"{path.name}: panel {title!r}", node["expr"]))
            for key, value in node.items():
                walk(value, title)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    walk(dashboard.get("panels", []), "")
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        expr = variable_query_expr(query or "")
        if expr:
            found.append((f"{path.name}: variable {variable.get('name')!r}", expr))
    return found


def rules_expressions(path):
    """(where, expr) of every rule, and the names of the recording rules."""
    lines = path.read_text().splitlines()
    found, recorded = [], set()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)(?:-\s+)?(expr|record):\s*(.*?)\s*$", line)
        if not m:
            i += 1
            continue
        key_column = line.index(m.group(2))
        key, value = m.group(2), m.group(3)
        # Continuation lines: anything indented deeper than the key (a block scalar, or a plain scalar
        # folded over several lines), and blank lines between them.
        body = []
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > key_column):
            body.append(lines[j])
            j += 1
        while body and not body[-1].strip():
            body.pop()
        if re.fullmatch(r"[|>][+-]?\d*", value):
            text = "\n".join(body)
        else:
            if value.startswith("#"):
                value = ""
            # Folded onto one line by YAML; kept on separate lines here, which PromQL reads the same, so
            # that a YAML comment (a PromQL comment too) ends at its line.
            text = "\n".join([value] + [b.strip() for b in body])
            if text.startswith("'") and text.endswith("'"):
                text = text[1:-1].replace("''", "'")
            elif text.startswith('"'):
                raise SystemExit(f"{path}:{i + 1}: write {key} as a plain, single-quoted or block scalar "
                                 "(double-quoted escapes are not read here)")
        if key == "record":
            recorded.add(text.strip())
        else:
            found.append((f"{path.name}:{i + 1}", text))
        i = j
    return found, recorded


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dashboard", type=Path, default=ROOT / "ops/grafana/livedelivery.json")
    parser.add_argument("--rules", type=Path, default=ROOT / "ops/prometheus/livedelivery.rules.yml")
    args = parser.parse_args()

    rule_exprs, recorded = rules_expressions(args.rules)
    dashboard_exprs = dashboard_expressions(args.dashboard)
    if not rule_exprs or not dashboard_exprs:
        print(f"check-series: found {len(rule_exprs)} rule and {len(dashboard_exprs)} dashboard expressions; "
              "expected some of each", file=sys.stderr)
        return 1

    allowed = CONTRACT | recorded
    unknown = []
    for where, expr in rule_exprs + dashboard_exprs:
        names = metric_names(expr)
        if not names and "vector(" not in expr and "time()" not in expr:
            unknown.append((where, "(no metric name found)", expr))
        for name in sorted(names - allowed):
            unknown.append((where, name, expr))
    if unknown:
        print("check-series: series outside the contract (ops/check-series.py lists the contract):",
              file=sys.stderr)
        for where, name, expr in unknown:
            print(f"  {where}: {name}\n      in: {' '.join(expr.split())}", file=sys.stderr)
        return 1
    print(f"check-series: {len(rule_exprs)} rule and {len(dashboard_exprs)} dashboard expressions use only "
          f"contract series and {len(recorded)} recording rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
