#!/usr/bin/env python3
"""Draws the suite's charts from summary.json with gnuplot (PNG).

    bench/make_charts.py [SUMMARY_JSON] [OUT_DIR]

Defaults: build/bench/summary.json and build/bench/img. docs/img holds the
charts of the run that docs/performance.md reports:

    bench/make_charts.py build/bench/summary.json docs/img

Writes publish_throughput.png (events/s against producer threads, walbus,
raw RocksDB and SQLite, buffered and synced) and latency_percentiles.png
(publish-to-handler p50, p99 and p99.9 against the offered load, with the
device's fdatasync p99) and delivery_ratios.png (what delivery costs:
walbus end to end against itself and against the floor, with the goals).
"""

import json
import os
import subprocess
import sys

SYSTEMS = [("walbus", "walbus"), ("rocksdb", "raw RocksDB"), ("sqlite", "SQLite WAL outbox")]
PERCENTILES = [("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")]


def rows(summary, group, family):
    return [r for r in summary["groups"][group]["rows"] if r["family"] == family]


def datablock(name, lines):
    return f"${name} << EOD\n" + "\n".join(lines) + "\nEOD\n"


def publish_chart(summary, path):
    publish = rows(summary, "publish", "Publish")
    script = ""
    for d in ("buffered", "sync"):
        for system, _ in SYSTEMS:
            points = sorted((int(r["params"]["producers"]), r["counters"]["events_per_second"]) for r in publish
                            if r["params"]["system"] == system and r["params"]["durability"] == d)
            script += datablock(f"{system}_{d}", [f"{p} {v}" for p, v in points])
    script += f"""
set terminal pngcairo size 1200,520 font "sans,11"
set output "{path}"
set multiplot layout 1,2 title "Publish throughput ({summary['profile']} run, {summary['machine'].get('cpus')} cores): one transaction = 100 B domain write + 200 B event"
set logscale x 2
set xlabel "producer threads"
set ylabel "transactions (events) per second"
set format y "%.0s%c"
set grid
set key top left
set yrange [0:*]
"""
    for d, title, key in (("buffered", "kBuffered  (SQLite: synchronous=NORMAL)", "top right"),
                          ("sync", "kSync  (SQLite: synchronous=FULL)", "top left")):
        script += f"set key {key}\n"
        plots = ", ".join(f"${system}_{d} using 1:2 with linespoints lw 2 pt 7 title '{label}'" for system, label in SYSTEMS)
        script += f'set title "{title}"\nplot {plots}\n'
    script += "unset multiplot\n"
    return script


def latency_chart(summary, path):
    latency = rows(summary, "latency", "Latency")
    script = ""
    for d in ("buffered", "sync"):
        points = sorted((int(r["params"]["rate_eps"]), r["counters"]) for r in latency if r["params"]["durability"] == d)
        script += datablock(f"lat_{d}", [" ".join([str(rate)] + [str(c[k]) for k, _ in PERCENTILES]) for rate, c in points])
    script += f"""
set terminal pngcairo size 1200,520 font "sans,11"
set output "{path}"
set multiplot layout 1,2 title "Publish-to-handler latency, open loop ({summary['profile']} run); target p99: 1 ms at 10k/s kBuffered, 2 ms at 1k/s kSync"
set logscale xy 10
set xrange [500:100000]
set xtics ("1k" 1000, "10k" 10000, "50k" 50000)
set format y "%g"
set xlabel "offered load, events per second"
set ylabel "latency, microseconds"
set grid
set key top left
"""
    # The p99 target of each panel, drawn as a dashed line; under kSync,
    # the device's own fdatasync p99 from the same run, the floor.
    for d, title, target_us in (("buffered", "kBuffered", 1000), ("sync", "kSync", 2000)):
        plots = ", ".join(f"$lat_{d} using 1:{i + 2} with linespoints lw 2 pt 7 title '{label}'"
                          for i, (_, label) in enumerate(PERCENTILES))
        plots += f", {target_us} with lines dt 2 lc rgb 'gray40' title 'p99 target'"
        fsync_p99 = summary.get("fsync_p99_us") if d == "sync" else None
        if fsync_p99:
            plots += f", {fsync_p99} with lines dt 3 lw 2 lc rgb 'black' title 'device fdatasync p99'"
        script += f'set title "{title}"\nplot {plots}\n'
    script += "unset multiplot\n"
    return script


# walbus against itself, and against the floor (the same durable work by
# hand on raw RocksDB): (summary key, label, goal).
DELIVERY_RATIOS = [
    ("e2e_hot_subject_vs_spread", "1 subject vs 1,000", 0.5),
    ("e2e_3subs_vs_1sub", "3 subscribers vs 1", 0.6),
    ("e2e_vs_floor", "vs floor, 1 sub", 0.85),
    ("e2e_3subs_vs_floor", "vs floor, 3 subs", 0.85),
    ("e2e_sync_vs_floor", "kSync vs floor, 1 sub", 0.85),
]


def delivery_chart(summary, path):
    s = summary
    lines = [f'{i} {s.get(key) or 0} {goal} "{label}"' for i, (key, label, goal) in enumerate(DELIVERY_RATIOS)]
    top = max([1.1] + [1.15 * (s.get(key) or 0) for key, _, _ in DELIVERY_RATIOS])
    script = datablock("ratios", lines)
    script += f"""
set terminal pngcairo size 900,480 font "sans,11"
set output "{path}"
set title "What delivery costs, end to end ({summary['profile']} run; kBuffered unless named): ratios within one run"
set style fill solid 0.6 border -1
set boxwidth 0.5
set yrange [0:{top:.2f}]
set xrange [-0.6:{len(DELIVERY_RATIOS) - 0.4}]
set ylabel "ratio (1 = free)"
set grid ytics
set key top center horizontal
plot $ratios using 1:2:xtic(4) with boxes title 'measured', \\
     $ratios using 1:3 with points pt 5 ps 2 lc rgb 'gray30' title 'goal', \\
     $ratios using 1:2:(sprintf("%.2f", $2)) with labels offset 0,0.8 notitle
"""
    return script


def main():
    summary_path = sys.argv[1] if len(sys.argv) > 1 else "build/bench/summary.json"
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "build/bench/img"
    with open(summary_path) as f:
        summary = json.load(f)
    os.makedirs(out_dir, exist_ok=True)
    for name, make in (("publish_throughput.png", publish_chart), ("latency_percentiles.png", latency_chart),
                       ("delivery_ratios.png", delivery_chart)):
        path = os.path.join(out_dir, name)
        subprocess.run(["gnuplot"], input=make(summary, path), text=True, check=True)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
