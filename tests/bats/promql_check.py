#!/usr/bin/python3
"""Check recorded dashboard queries (tests/data/kepler09-dashboards.txt) against a scrape.

  promql_check.py QUERIES SCRAPE   every query that asks for a Kepler metric finds, for each
                                   Kepler selector in it, a series of that name whose labels
                                   satisfy its matchers, with every label the query groups by
                                   (by (...), label_values); a query marked "# expect: none"
                                   must find nothing. Prints one line per query and a summary;
                                   exits 1 when one fails.
  promql_check.py --list QUERIES   the queries with their variables set, as
                                   "EXPECT<TAB>QUERY" lines (EXPECT: data, none, rule, other),
                                   for a real Prometheus to run (Grafana's label_values(S, L)
                                   as count by (L) (S), query_result(Q) as Q).

Selectors are found by pattern, not by a PromQL parser: a metric name starting with kepler,
its {matchers}, and the by/without/label_values labels of the whole query. job and instance
are the scrape target's labels (Prometheus adds them), so they are not looked for in the scrape.
"""
import re
import sys

TARGET = {"job", "instance"}
SEL = re.compile(r'\b(kepler[_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?')
MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
BY = re.compile(r'\b(?:by)\s*\(([^)]*)\)')
LABEL_VALUES = re.compile(r'label_values\(\s*(kepler[_:][a-zA-Z0-9_:]*)[^,]*,\s*([a-zA-Z_]\w*)\s*\)')
MADE = re.compile(r'label_(?:join|replace)\([^"]*"([a-zA-Z_]\w*)"')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def load_queries(path):
    """[(expect, source line number, query with variables set)]."""
    sets, out, expect = {}, [], None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.startswith("set "):
            _, name, value = line.split(" ", 2)
            sets[name] = value
            continue
        m = re.match(r'# expect: (none|rule)', line)
        if m:
            expect = m.group(1)
            continue
        if not line.strip() or line.startswith("#"):
            continue
        # "variable NAME: QUERY", "rule NAME: EXPR" (a rule's name has colons, none before a space)
        q = line.split(": ", 1)[1] if line.startswith(("variable ", "rule ")) else line

        def var(m):
            name = m.group(1) or m.group(2)
            if name not in sets:
                raise SystemExit(f"{path}:{n}: no value set for ${name}")
            return sets[name]

        q = re.sub(r'\$\{(\w+)\}|\$(\w+)', var, q)
        kind = expect or ("data" if SEL.search(q) else "other")
        out.append((kind, n, q))
        expect = None
    return out


def load_scrape(path):
    """{name: [labels]} of the exposition's samples."""
    fams = {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ', line)
        if not m:
            continue
        labels = {k: unescape(v) for k, v in re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(3) or "")}
        fams.setdefault(m.group(1), []).append(labels)
    return fams


def matches(labels, matchers):
    for name, op, value in matchers:
        have = labels.get(name, "")
        value = unescape(value)
        if op == "=" and have != value or op == "!=" and have == value:
            return False
        if op == "=~" and not re.fullmatch(value, have) or op == "!~" and re.fullmatch(value, have):
            return False
    return True


def check(q, fams, rules):
    """(found, why): whether every Kepler selector finds its series; recording rules (names with
    a colon) are skipped when rules is set, else looked for (and never in a scrape)."""
    made = set(MADE.findall(q))
    grouped = {l.strip() for g in BY.findall(q) for l in g.split(",") if l.strip()} - TARGET - made
    wanted = {}
    for name, label in LABEL_VALUES.findall(q):
        wanted.setdefault(name, set()).add(label)
    for m in SEL.finditer(q):
        name = m.group(1)
        if ":" in name and rules:
            continue
        matchers = [t for t in MATCHER.findall(m.group(2) or "") if t[0] not in TARGET]
        series = [s for s in fams.get(name, []) if matches(s, matchers)]
        if not series:
            return False, f"no series {name}{m.group(2) or ''}"
        have = set().union(*(s.keys() for s in series))
        missing = (grouped | wanted.get(name, set())) - have
        if missing:
            return False, f"{name} has no label {', '.join(sorted(missing))}"
    return True, ""


def main():
    if sys.argv[1] == "--list":
        for kind, _, q in load_queries(sys.argv[2]):
            # Grafana's label_values(SELECTOR, LABEL) lists LABEL's values among the series
            m = re.fullmatch(r'label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)', q)
            if m:
                q = f"count by ({m.group(2)}) ({m.group(1)})"
            # query_result(QUERY): the query's own result
            m = re.fullmatch(r'query_result\((.*)\)', q)
            if m:
                q = m.group(1).strip()
            print(f"{kind}\t{q}")
        return 0
    queries, fams = load_queries(sys.argv[1]), load_scrape(sys.argv[2])
    count = {"ok": 0, "fail": 0, "skip": 0}
    for kind, n, q in queries:
        if kind == "other":
            print(f"skip (no Kepler metric) line {n}: {q}")
            count["skip"] += 1
            continue
        found, why = check(q, fams, kind == "rule")
        good = found if kind in ("data", "rule") else not found
        if kind == "none" and found:
            why = "marked expect: none, but it finds its series"
        print(f"{'ok' if good else 'FAIL'} ({kind}) line {n}: {q}{'' if good else ': ' + why}")
        count["ok" if good else "fail"] += 1
    print(f"{count['ok']} ok, {count['fail']} failed, {count['skip']} without a Kepler metric")
    return 1 if count["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
