#!/usr/bin/env python3
"""Checks the include rules of docs/design.md ("The map").

Each part of the tree may include only the parts listed for it below, and
only the third-party headers listed for it; no two files include each
other, directly or through others. Exits 1 naming every broken rule.

Usage: tools/check_layers.py [SOURCE_DIR]
       tools/check_layers.py --self-test   (breaks each rule in a scratch
                                            tree and checks it is caught)
"""

import os
import re
import sys
import tempfile

# Part -> the parts its files may include (its own is always allowed).
# "public" is walbus's installed headers (walbus/...).
MAY_INCLUDE = {
    "public": set(),
    "adapters": {"public"},
    "bus/util": {"public"},
    "bus/telemetry": {"public", "bus/util"},
    "storage": {"public", "bus/util"},
    "bus/core": {"public", "bus/util", "bus/telemetry", "storage"},
    "bus/dispatch": {"public", "bus/util", "bus/telemetry", "storage", "bus/core"},
    "bus/ops": {"public", "bus/util", "bus/telemetry", "storage", "bus/core"},
    "bus/process": {"public", "bus/util", "storage", "bus/core"},
    "bus/api": {"public", "bus/util", "bus/telemetry", "storage", "bus/core", "bus/dispatch", "bus/ops",
                "bus/process"},
    # Applications of the library: its public API and bus/util's codecs.
    "bridge": {"public", "bus/util"},
    "prometheus": {"public"},
    "testing": {"public", "bus/util"},
    "examples": {"public", "adapters"},
    # Internal users, which may reach inside (never the tests).
    "storage/testing": {"public", "bus/util", "storage"},
    "tools": {"public", "bus/util", "bus/telemetry", "storage", "bus/core", "bus/dispatch", "bus/ops", "bus/api",
              "bus/process", "bridge"},
    "bench": {"public", "bus/util", "bus/telemetry", "storage", "bus/core", "bus/dispatch", "bus/ops", "bus/api",
              "bus/process", "tools"},
}

# Single includes allowed against the rules above, each with its reason.
EXCEPTIONS = {
    # The demo starts its own nats-server, as the bridge's tests do; it is
    # built in this tree only (the installed examples are the others).
    ("examples/fleet/fleet_demo.cc", "tools/nats_server.h"),
}

# Part -> the third-party header directories its files may include.
THIRD_PARTY = {
    "rocksdb": {"storage", "storage/testing", "tools", "bench"},
    "flatbuffers": {"bus/core", "tools", "bench", "adapters", "examples"},
    "spdlog": {"bus/telemetry", "bus/api", "tools", "bench", "adapters"},
    "fmt": {"bus/telemetry", "bus/api", "bridge", "tools", "bench"},
    "concurrentqueue": {"bus/core", "bus/dispatch", "bench"},
    "nats": {"bridge", "tools"},
    "prometheus": {"prometheus", "examples"},
    "CLI": {"tools"},
    "benchmark": {"bench"},
    "sqlite3.h": {"bench"},
}

SOURCE_SUFFIXES = (".h", ".cc", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def part_of(path):
    """The part a repository path belongs to, or None for code not ruled."""
    # Opt-in adapters to a third-party library, which only an application
    # that has that library includes (walbus/adapters/spdlog.h).
    if path.startswith("bus/include/walbus/adapters/"):
        return "adapters"
    if path.startswith(("bus/include/", "bridge/include/", "prometheus/include/", "testing/include/")):
        return "public"
    if path.startswith("storage/testing/"):
        return "storage/testing"
    for prefix in ("bus/util", "bus/telemetry", "bus/core", "bus/dispatch", "bus/ops", "bus/process", "bus/api"):
        if path.startswith(prefix + "/"):
            return prefix
    top = path.split("/", 1)[0]
    if top in MAY_INCLUDE:
        return top
    return None


def sources(root):
    for top in ("bus", "storage", "bridge", "prometheus", "testing", "examples", "tools", "bench"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(directory, name), root)


def resolve(root, including, target):
    """The repository path a quoted include names, or None (generated)."""
    if target.startswith("walbus/"):
        for base in ("bus/include", "bridge/include", "prometheus/include", "testing/include"):
            if os.path.exists(os.path.join(root, base, target)):
                return os.path.join(base, target)
        return None  # generated: walbus/version.h
    if os.path.exists(os.path.join(root, target)):
        return target
    beside = os.path.join(os.path.dirname(including), target)
    if os.path.exists(os.path.join(root, beside)):
        return os.path.normpath(beside)
    return None  # generated: envelope_generated.h


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print("%d include rule(s) broken; the rules are in tools/check_layers.py and docs/design.md" % len(problems))
        return 1
    print("include rules hold")
    return 0


def check(root):
    """Every broken rule under `root`, one line each."""
    problems = []
    graph = {}
    for path in sources(root):
        part = part_of(path)
        if part is None:
            continue
        graph[path] = []
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, target = m.groups()
                where = "%s:%d" % (path, number)
                if kind == "<":
                    head = target.split("/", 1)[0]
                    allowed = THIRD_PARTY.get(head) if "/" in target else THIRD_PARTY.get(target)
                    if allowed is not None and part not in allowed:
                        problems.append("%s: %s may not include <%s>" % (where, part, target))
                    continue
                included = resolve(root, path, target)
                if included is None:
                    continue
                graph[path].append(included)
                other = part_of(included)
                if (path, included) in EXCEPTIONS:
                    continue
                if other is None:
                    problems.append("%s: %s includes %s, which is not part of the library" % (where, part, target))
                elif other != part and other not in MAY_INCLUDE[part]:
                    problems.append("%s: %s may not include %s (%s)" % (where, part, target, other))
    return problems + cycles(graph)


def self_test():
    """Each kind of broken rule, in a scratch tree, must be reported."""
    tree = {
        "bus/include/walbus/bus.h": '#include <rocksdb/db.h>\n',             # third party in public
        "storage/db.h": '#include "bus/core/scope.h"\n',                    # storage on the core
        "bus/core/scope.h": '#include "bus/core/committer.h"\n',
        "bus/core/committer.h": '#include "bus/core/scope.h"\n',            # a cycle
        "bus/util/utf8.h": '#include "bus/api/bus_impl.h"\n',               # util on the api
        "bus/api/bus_impl.h": '#include "tools/walbus/inspect.h"\n',        # library on the tool
        "tools/walbus/inspect.h": "",
        "bridge/relay.cc": '#include "bus/core/scope.h"\n',                 # bridge on internals
        "bus/dispatch/handler_runner.cc": '#include "bus/util/utf8.h"\n#include "walbus/bus.h"\n',  # allowed
    }
    expected = [
        "bus/include/walbus/bus.h:1: public may not include <rocksdb/db.h>",
        "storage/db.h:1: storage may not include bus/core/scope.h (bus/core)",
        "include cycle: bus/core/scope.h -> bus/core/committer.h -> bus/core/scope.h",
        "bus/util/utf8.h:1: bus/util may not include bus/api/bus_impl.h (bus/api)",
        "bus/api/bus_impl.h:1: bus/api may not include tools/walbus/inspect.h (tools)",
        "bridge/relay.cc:1: bridge may not include bus/core/scope.h (bus/core)",
    ]
    with tempfile.TemporaryDirectory() as root:
        for path, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        found = check(root)
    missing = [e for e in expected if e not in found]
    extra = [f for f in found if f not in expected]
    for m in missing:
        print("not caught: " + m)
    for e in extra:
        print("reported, though allowed: " + e)
    if missing or extra:
        return 1
    print("self-test: all %d broken rules caught, nothing else reported" % len(expected))
    return 0


def cycles(graph):
    """Every include cycle among files, each named once."""
    found = []
    state = {}  # path -> 1 while on the stack, 2 when done
    stack = []

    def visit(path):
        state[path] = 1
        stack.append(path)
        for nxt in graph.get(path, ()):
            if state.get(nxt) == 1:
                found.append("include cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[path] = 2

    for path in sorted(graph):
        if path not in state:
            visit(path)
    return found


if __name__ == "__main__":
    sys.exit(main())
