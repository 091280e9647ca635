#!/usr/bin/env python3
"""Runs walbus's benchmark suite group by group, prints the tables and the
targets, and writes build/bench/summary.json (and summary.md, the same
tables in Markdown).

    bench/run_suite.py            full profile (about 30 minutes on 2 cores,
                                  10 of them the small-budget soak)
    bench/run_suite.py --quick    reduced sizes, about 4 minutes
    bench/run_suite.py --smoke    seconds; only shows that everything runs
    bench/run_suite.py --only publish,latency
                                  rerun some groups; the summary takes the
                                  other groups from their last run of the
                                  same profile

Each group runs in its own bus_bench process (so the backlog group's
memory figures start clean) and leaves its Google Benchmark JSON in
build/bench/<profile>/<group>.json. Ratios are always taken between
figures of the same group run: on a shared machine only those compare.
The throughput groups (publish, end to end) run every benchmark three
times, the runs of all systems shuffled together (Google Benchmark's
random interleaving), and report each one's median: a burst of other
work on the machine then hits one run of one system, not a whole series.
Nothing here asserts a speed: a missed target is reported, not failed.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

GROUPS = [
    # (group, the benchmark families it runs, as a regular expression)
    ("publish", "(Publish(Contract|BufferedSync|CommitSync)?|PayloadCheck)"),
    ("end-to-end", "EndToEnd(NoEffect)?"),
    ("latency", "Latency(Fsync)?"),
    ("dispatch", "Dispatch"),
    ("backlog", "Backlog(FanOut)?"),
    ("scaling", "Scaling"),
    ("scan", "Scan"),
    ("timers", "Timers"),
    ("devices", "Devices"),
    ("process", "Process"),
]

# Groups that run walbus-stress rather than bus_bench: (group, its arguments
# by profile). The soak is the small-device point: 2,000 events/s within a
# 16 MiB memory budget; its peak resident set and how far it rose after the
# first quarter (warm-up). The idle run is a bus within the smallest budget
# with next to nothing to do: its resident set.
SOAK_ARGS = ["--rate", "2000", "--subscribers", "2", "--subjects", "1000", "--memory-budget-mib", "16"]
# The offline soak (walbus-offline-soak): events committed at full speed
# with the relay's server down until the disk budget refuses them, then
# the server started. Its directory's and memory's peaks in each phase,
# and whether the priority level overtook the backlog.
OFFLINE_ARGS = ["--memory-budget-mib", "16"]
STRESS_GROUPS = {
    "offline": {"full": ["--events", "1000000", "--disk-budget-mib", "64"] + OFFLINE_ARGS,
                "quick": ["--events", "300000", "--disk-budget-mib", "16"] + OFFLINE_ARGS,
                # The journal's bound paces the drain per confirm_after: at
                # 4 MiB, 0.5 MiB per 10 s would take a minute.
                "smoke": ["--events", "30000", "--disk-budget-mib", "4", "--confirm-after-ms", "1000"]
                + OFFLINE_ARGS},
    "soak": {"full": ["--soak", "600"] + SOAK_ARGS, "quick": ["--soak", "60"] + SOAK_ARGS,
             "smoke": ["--soak", "3"] + SOAK_ARGS},
    "idle": {p: ["--soak", "10" if p != "smoke" else "2", "--rate", "1", "--memory-budget-mib", "8"]
             for p in ("full", "quick", "smoke")},
}
# The program a stress group runs, when not walbus-stress; it takes no
# --report-every.
STRESS_PROGRAMS = {"offline": "walbus-offline-soak"}

# Runs per benchmark, interleaved at random, median reported (see above).
# The smoke profile runs each once: it only shows that everything runs.
REPETITIONS = {"publish": 3, "end-to-end": 3, "scan": 3}

# Keys summary.json must hold (numbers).
REQUIRED_KEYS = [
    "publish_buffered_eps",
    "publish_buffered_vs_rocksdb",
    "publish_sync_16p_eps",
    "publish_sync_16p_vs_sqlite_full",
    "publish_schema_vs_plain",
    "publish_sync_1_in_10_vs_buffered",
    "publish_commit_sync_vs_sync_bus",
    "e2e_buffered_eps",
    "e2e_buffered_vs_sqlite_normal",
    "e2e_sync_vs_sqlite_full",
    "e2e_vs_floor",
    "e2e_3subs_vs_floor",
    "latency_buffered_10k_p99_us",
    "latency_sync_1k_p99_us",
    "latency_sync_10k_p99_us",
    "latency_sync_1k_p99_vs_fsync",
    "latency_sync_10k_p99_vs_fsync",
    "e2e_hot_subject_vs_spread",
    "e2e_3subs_vs_1sub",
    "e2e_vs_publish_only",
    "e2e_no_effect_vs_publish_only",
    "dispatch_vs_queue_ceiling",
    "backlog_rss_mib",
    "backlog_events",
    "backlog_1m_rss_mib_budget16",
    "backlog_3subs_vs_1sub",
    "recovery_first_delivery_ms",
    "scan_view_vs_rocksdb",
    "scan_merged_vs_plain",
    "get_view_vs_rocksdb",
    "schedule_publish_vs_plain",
    "timer_fire_eps",
    "timer_lateness_p99_ms",
    "timers_10m_rss_mib",
    "idle_wakeups_per_s",
    "soak_rss_mib_budget16",
    "soak_disk_write_amplification_budget16",
    "offline_disk_peak_vs_budget",
    "offline_rss_mib",
    "relay_priority_overtakes",
    "idle_rss_mib_budget8",
    "disk_write_amplification",
    "process_vs_hand_written",
    "process_open_1m_rss_mib",
    "process_read_one_us",
]

# Google Benchmark's own suffixes on a name; not parameters.
RUNNER_SUFFIXES = ("iterations:", "manual_time", "real_time", "threads:")


def parse_name(name):
    """'Publish/system:walbus/producers:16/iterations:1/manual_time' ->
    ('Publish', {'system': 'walbus', 'producers': '16'})."""
    parts = name.split("/")
    params = {}
    for part in parts[1:]:
        if part.startswith(RUNNER_SUFFIXES) or ":" not in part:
            continue
        key, value = part.split(":", 1)
        params[key] = value
    return parts[0], params


def counters_of(b):
    return {k: v for k, v in b.items() if isinstance(v, (int, float)) and k not in (
        "family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads",
        "iterations", "real_time", "cpu_time")}


def load_group(path):
    """One row per benchmark. Repeated ones: the median's counters, and in
    'runs' each run's, in the order they ran."""
    with open(path) as f:
        data = json.load(f)
    runs, medians, order = {}, {}, []
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            raise SystemExit(f"{b['name']} failed: {b.get('error_message')}")
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = counters_of(b)
            continue
        if name not in runs:
            runs[name] = []
            order.append(name)
        runs[name].append(counters_of(b))
    rows = []
    for name in order:
        family, params = parse_name(name)
        counters = medians.get(name, runs[name][0])
        rows.append({"name": name, "family": family, "params": params, "counters": counters, "runs": runs[name]})
    return {"context": data.get("context", {}), "rows": rows}


def run_group(bench, profile, group, prefix, out_path):
    cmd = [bench, f"--profile={profile}", f"--benchmark_filter=^{prefix}/",
           f"--benchmark_out={out_path}", "--benchmark_out_format=json"]
    repetitions = 1 if profile == "smoke" else REPETITIONS.get(group, 1)
    if repetitions > 1:
        cmd += [f"--benchmark_repetitions={repetitions}", "--benchmark_enable_random_interleaving=true"]
    print(f"==> {' '.join(cmd)}", flush=True)
    # The console table streams through; the JSON file is what is read.
    rc = subprocess.call(cmd)
    if rc != 0:
        raise SystemExit(f"bus_bench exited with {rc} in group {group}")


def run_stress(build_dir, profile, group, out_path):
    program = STRESS_PROGRAMS.get(group, "walbus-stress")
    cmd = [os.path.join(build_dir, "bin", program)] + STRESS_GROUPS[group][profile]
    if group not in STRESS_PROGRAMS:
        cmd += ["--report-every", "30"]
    print(f"==> {' '.join(cmd)}", flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"walbus-stress exited with {done.returncode} in group {group}:\n{done.stdout}")
    lines = done.stdout.strip().splitlines()
    print("\n".join(lines[:-1]))  # the progress lines; the last is the result
    with open(out_path, "w") as f:
        f.write(lines[-1] + "\n")


def load_stress(path):
    with open(path) as f:
        return json.load(f)


class Results:
    """The rows of every group, looked up by family and parameters."""

    def __init__(self, groups, stress):
        self.groups = groups
        self.stress = stress  # walbus-stress's result by group

    def rows(self, family, **params):
        out = []
        for g in self.groups.values():
            for r in g["rows"]:
                if r["family"] == family and all(r["params"].get(k) == str(v) for k, v in params.items()):
                    out.append(r)
        return out

    def value(self, family, counter, **params):
        rows = self.rows(family, **params)
        if len(rows) != 1:
            return None
        return rows[0]["counters"].get(counter)


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def difference(a, b):
    return a - b if a is not None and b is not None else None


def summarize(res):
    s = {}
    eps = "events_per_second"
    producers = sorted({int(r["params"]["producers"]) for r in res.rows("Publish")})

    def best(system, durability):
        values = [(res.value("Publish", eps, system=system, durability=durability, producers=p), p) for p in producers]
        values = [v for v in values if v[0] is not None]
        return max(values) if values else (None, None)

    # Each system at its best producer count: what a user tuning it would get.
    walbus_best, walbus_best_p = best("walbus", "buffered")
    rocksdb_best, _ = best("rocksdb", "buffered")
    s["publish_buffered_eps"] = walbus_best
    s["publish_buffered_producers"] = walbus_best_p
    s["publish_buffered_vs_rocksdb"] = ratio(walbus_best, rocksdb_best)
    s["publish_buffered_1p_vs_rocksdb"] = ratio(res.value("Publish", eps, system="walbus", durability="buffered", producers=1),
                                                res.value("Publish", eps, system="rocksdb", durability="buffered", producers=1))
    s["publish_buffered_vs_sqlite_normal"] = ratio(walbus_best, best("sqlite", "buffered")[0])
    s["publish_sync_16p_eps"] = res.value("Publish", eps, system="walbus", durability="sync", producers=16)
    s["publish_sync_16p_vs_sqlite_full"] = ratio(
        s["publish_sync_16p_eps"], res.value("Publish", eps, system="sqlite", durability="sync", producers=16))
    s["publish_sync_16p_vs_rocksdb"] = ratio(
        s["publish_sync_16p_eps"], res.value("Publish", eps, system="rocksdb", durability="sync", producers=16))
    s["publish_sync_1p_eps"] = res.value("Publish", eps, system="walbus", durability="sync", producers=1)
    s["publish_sync_16p_vs_1p"] = ratio(s["publish_sync_16p_eps"], s["publish_sync_1p_eps"])
    # kBuffered with the log's background sync against none in the run.
    synced = lambda log_sync, p: res.value("PublishBufferedSync", eps, log_sync=log_sync, producers=p)
    s["buffered_sync_publish_ratio"] = ratio(synced("background", 1), synced("none", 1))
    s["buffered_sync_publish_ratio_4p"] = ratio(synced("background", 4), synced("none", 4))
    # Commits that ask for an fsync on a kBuffered bus (16 producers): one
    # in ten against none, and every one against a kSync bus.
    commit_sync = lambda bus, every: res.value("PublishCommitSync", eps, bus=bus, sync_every=every, producers=16)
    s["publish_sync_1_in_10_vs_buffered"] = ratio(commit_sync("buffered", 10), commit_sync("buffered", 0))
    s["publish_commit_sync_vs_sync_bus"] = ratio(commit_sync("buffered", 1), commit_sync("sync", 0))
    # Payloads checked by their registered schema against the same without one.
    contract = lambda system, p: res.value("PublishContract", eps, system=system, producers=p)
    s["publish_schema_1p_vs_plain"] = ratio(contract("schema", 1), contract("plain", 1))
    s["publish_schema_vs_plain"] = ratio(contract("schema", 4), contract("plain", 4))
    # The payload check's time per byte: distinct tables, and offsets that
    # all point at one table (refused at the work bound: the worst case).
    check = lambda payload: res.value("PayloadCheck", "ns_per_byte", payload=payload)
    s["payload_check_ns_per_byte"] = check("distinct_tables")
    s["payload_check_worst_ns_per_byte"] = check("shared_offsets")
    s["payload_check_worst_vs_ordinary"] = ratio(s["payload_check_worst_ns_per_byte"], s["payload_check_ns_per_byte"])

    def e2e(system, durability, subscribers):
        return res.value("EndToEnd", eps, system=system, durability=durability, subscribers=subscribers)

    s["e2e_buffered_eps"] = e2e("walbus", "buffered", 1)
    s["e2e_buffered_vs_sqlite_normal"] = ratio(s["e2e_buffered_eps"], e2e("sqlite", "buffered", 1))
    s["e2e_sync_eps"] = e2e("walbus", "sync", 1)
    s["e2e_sync_vs_sqlite_full"] = ratio(s["e2e_sync_eps"], e2e("sqlite", "sync", 1))
    s["e2e_buffered_3sub_eps"] = e2e("walbus", "buffered", 3)
    s["e2e_buffered_3sub_vs_sqlite_normal"] = ratio(s["e2e_buffered_3sub_eps"], e2e("sqlite", "buffered", 3))
    s["e2e_sync_3sub_vs_sqlite_full"] = ratio(e2e("walbus", "sync", 3), e2e("sqlite", "sync", 3))
    # Against the least durable work the same guarantees need, by hand on
    # raw RocksDB (raw_rocksdb.h), in the same run.
    s["e2e_vs_floor"] = ratio(s["e2e_buffered_eps"], e2e("floor", "buffered", 1))
    s["e2e_3subs_vs_floor"] = ratio(s["e2e_buffered_3sub_eps"], e2e("floor", "buffered", 3))
    s["e2e_sync_vs_floor"] = ratio(s["e2e_sync_eps"], e2e("floor", "sync", 1))
    s["e2e_sync_3subs_vs_floor"] = ratio(e2e("walbus", "sync", 3), e2e("floor", "sync", 3))

    s["latency_buffered_10k_p99_us"] = res.value("Latency", "p99_us", durability="buffered", rate_eps=10000)
    s["latency_sync_1k_p99_us"] = res.value("Latency", "p99_us", durability="sync", rate_eps=1000)
    s["latency_sync_10k_p99_us"] = res.value("Latency", "p99_us", durability="sync", rate_eps=10000)
    # The device's floor under every kSync latency: an append and its
    # fdatasync, on the same file system, in the same run.
    s["fsync_p50_us"] = res.value("LatencyFsync", "p50_us")
    s["fsync_p99_us"] = res.value("LatencyFsync", "p99_us")
    s["latency_sync_1k_p99_vs_fsync"] = ratio(s["latency_sync_1k_p99_us"], s["fsync_p99_us"])
    s["latency_sync_10k_p99_vs_fsync"] = ratio(s["latency_sync_10k_p99_us"], s["fsync_p99_us"])

    # What delivery costs, walbus against itself: one hot subject against
    # 1,000 (the same scaling run), three subscribers against one, and end
    # to end against publishing alone with the same four producers.
    scaling = lambda subjects: res.value("Scaling", eps, subjects=subjects)
    s["e2e_hot_subject_vs_spread"] = ratio(scaling(1), scaling(1000))
    s["e2e_3subs_vs_1sub"] = ratio(s["e2e_buffered_3sub_eps"], s["e2e_buffered_eps"])
    e2e_rows = res.rows("EndToEnd", system="walbus", durability="buffered", subscribers=1)
    e2e_producers = e2e_rows[0]["params"].get("producers") if len(e2e_rows) == 1 else None
    s["e2e_vs_publish_only"] = ratio(
        s["e2e_buffered_eps"],
        res.value("Publish", eps, system="walbus", durability="buffered", producers=e2e_producers))
    # The same with handlers that write nothing: delivery's own share.
    s["e2e_no_effect_vs_publish_only"] = ratio(
        res.value("EndToEndNoEffect", eps, system="walbus", durability="buffered", subscribers=1),
        res.value("Publish", eps, system="walbus", durability="buffered", producers=e2e_producers))

    s["dispatch_eps"] = res.value("Dispatch", eps, system="walbus", path="handler")
    s["dispatch_filtered_eps"] = res.value("Dispatch", eps, system="walbus", path="filtered")
    s["queue_eps"] = res.value("Dispatch", eps, system="queue", path="spsc")
    s["dispatch_vs_queue_ceiling"] = ratio(s["dispatch_eps"], s["queue_eps"])

    backlog = res.rows("Backlog", budget_mib="default")
    b = backlog[0]["counters"] if len(backlog) == 1 else {}
    small = res.rows("Backlog", budget_mib=16)
    small = small[0]["counters"] if len(small) == 1 else {}
    # Named for the full profile's million events; smaller profiles drain
    # fewer (backlog_events_budget16 says how many).
    s["backlog_1m_rss_mib_budget16"] = small.get("rss_peak_mib")
    s["backlog_events_budget16"] = small.get("events")
    s["backlog_events"] = b.get("events")
    s["backlog_rss_mib"] = b.get("rss_peak_mib")
    s["backlog_disk_mib"] = b.get("disk_with_backlog_mib")
    s["recovery_open_ms"] = b.get("open_ms")
    s["recovery_first_delivery_ms"] = b.get("first_delivery_ms")
    s["recovery_catch_up_seconds"] = b.get("catch_up_seconds")
    s["recovery_catch_up_eps"] = b.get("catch_up_events_per_second")
    s["outbox_entries_after_catch_up"] = b.get("outbox_entries_after")
    s["outbox_sst_mib_after_catch_up"] = b.get("outbox_sst_mib_after")
    # Three subscribers draining the same backlog share the dispatcher's
    # reads of the outbox: events/s against one subscriber.
    fan_out = lambda n: res.value("BacklogFanOut", "catch_up_events_per_second", subscribers=n)
    s["backlog_3subs_eps"] = fan_out(3)
    s["backlog_3subs_vs_1sub"] = ratio(s["backlog_3subs_eps"], fan_out(1))

    def scan(system, path):
        return res.value("Scan", "rows_per_second", system=system, path=path)
    s["scan_view_rows_per_second"] = scan("walbus", "view")
    s["scan_view_vs_rocksdb"] = ratio(s["scan_view_rows_per_second"], scan("rocksdb", "iterator"))
    s["scan_merged_vs_plain"] = ratio(scan("walbus", "merged"), scan("walbus", "transaction"))
    s["get_view_vs_rocksdb"] = ratio(scan("walbus", "get"), scan("rocksdb", "get"))

    timers = lambda measure, counter, **p: res.value("Timers", counter, measure=measure, **p)
    s["schedule_publish_vs_plain"] = ratio(timers("publish", eps, system="scheduled"),
                                           timers("publish", eps, system="immediate"))
    s["timer_fire_eps"] = timers("fire", eps)
    s["timer_lateness_p99_ms"] = timers("lateness", "p99_ms")
    # Named for the full profile's 10 million pending timers; the smaller
    # profiles pend fewer (timers_pending says how many).
    s["timers_10m_rss_mib"] = timers("pending", "rss_peak_mib")
    s["timers_pending"] = timers("pending", "pending")

    process = lambda counter, **p: res.value("Process", counter, **p)
    s["process_flow_instances_per_second"] = process("instances_per_second", measure="flow", system="process")
    s["process_vs_hand_written"] = ratio(s["process_flow_instances_per_second"],
                                         process("instances_per_second", measure="flow", system="hand-written"))
    # Named for the full profile's million open instances; the smaller
    # profiles open fewer (process_open_instances says how many).
    s["process_open_1m_rss_mib"] = process("rss_peak_mib", measure="open")
    s["process_open_instances"] = process("instances", measure="open")
    s["process_read_one_us"] = process("read_one_us", measure="open")

    soak = res.stress["soak"]
    s["soak_rss_mib_budget16"] = soak.get("peak_rss_mib")
    s["soak_rss_growth_after_warmup_mib_budget16"] = difference(soak.get("peak_rss_mib"),
                                                                           soak.get("warmup_peak_rss_mib"))
    s["soak_seconds_budget16"] = soak.get("soak_seconds")
    s["soak_anon_rss_mib_budget16"] = soak.get("peak_anon_rss_mib")
    s["soak_disk_write_amplification_budget16"] = soak.get("device_bytes_per_logical_byte")
    offline = res.stress["offline"]
    s["offline_disk_budget_mib"] = offline.get("disk_budget_mib")
    s["offline_disk_peak_vs_budget"] = offline.get("offline_disk_peak_vs_budget")
    s["offline_rss_mib"] = offline.get("offline_rss_mib")
    s["offline_drain_disk_peak_vs_budget"] = offline.get("drain_disk_peak_vs_budget")
    s["offline_drain_rss_mib"] = offline.get("drain_rss_mib")
    s["offline_heap_mib"] = offline.get("offline_heap_mib")
    s["offline_drain_heap_mib"] = offline.get("drain_heap_mib")
    s["offline_committed_events"] = offline.get("committed")
    s["offline_drain_events_per_second"] = offline.get("drain_events_per_second")
    s["relay_priority_overtakes"] = offline.get("relay_priority_overtakes")
    s["relay_readings_waiting_when_acks_done"] = offline.get("readings_waiting_when_acks_done")
    s["idle_rss_mib_budget8"] = res.stress["idle"].get("peak_rss_mib")
    s["idle_anon_rss_mib_budget8"] = res.stress["idle"].get("peak_anon_rss_mib")
    s["idle_wakeups_per_s"] = res.value("Devices", "wakeups_per_s", measure="idle")
    s["disk_write_amplification"] = res.value("Devices", "device_bytes_per_logical_byte", measure="wear",
                                              budget_mib="default")
    s["disk_write_amplification_budget16"] = res.value("Devices", "device_bytes_per_logical_byte", measure="wear",
                                                       budget_mib=16)
    return s


def targets(s):
    """(description, key, value, bound, met)."""
    def at_least(key, bound, what):
        v = s.get(key)
        return (what, key, v, f">= {bound:g}", v is not None and v >= bound)

    def at_most(key, bound, what):
        v = s.get(key)
        return (what, key, v, f"<= {bound:g}", v is not None and v <= bound)

    return [
        at_least("publish_buffered_vs_rocksdb", 0.9, "publish kBuffered vs raw RocksDB"),
        at_least("publish_buffered_eps", 200e3, "publish kBuffered events/s"),
        at_least("e2e_buffered_vs_sqlite_normal", 6, "end to end kBuffered vs SQLite NORMAL"),
        at_least("e2e_buffered_eps", 100e3, "end to end kBuffered events/s"),
        at_least("publish_sync_16p_vs_sqlite_full", 6, "publish kSync 16 producers vs SQLite FULL"),
        at_least("publish_sync_16p_vs_1p", 1.0, "kSync grows with producers (16p / 1p)"),
        at_least("publish_schema_vs_plain", 0.8, "publish with schema checks vs without (4 producers)"),
        at_least("buffered_sync_publish_ratio", 0.9, "publish kBuffered with the log's background sync vs none (1 producer)"),
        at_most("latency_buffered_10k_p99_us", 1000, "p99 at 10k/s kBuffered (us)"),
        at_most("latency_sync_1k_p99_us", 2000, "p99 at 1k/s kSync (us)"),
        at_most("latency_sync_10k_p99_us", 2000, "p99 at 10k/s kSync (us)"),
        at_least("e2e_hot_subject_vs_spread", 0.5, "end to end, 1 subject vs 1,000"),
        at_least("e2e_3subs_vs_1sub", 0.6, "end to end, 3 subscribers vs 1 (events/s)"),
        at_least("e2e_vs_floor", 0.85, "end to end kBuffered vs the floor (1 subscriber)"),
        at_least("e2e_3subs_vs_floor", 0.85, "end to end kBuffered vs the floor (3 subscribers)"),
        at_least("e2e_sync_vs_floor", 0.85, "end to end kSync vs the floor (1 subscriber)"),
        at_least("e2e_sync_3subs_vs_floor", 0.85, "end to end kSync vs the floor (3 subscribers)"),
        at_most("latency_sync_1k_p99_vs_fsync", 1.5, "p99 at 1k/s kSync vs the device's fsync p99"),
        at_most("latency_sync_10k_p99_vs_fsync", 2, "p99 at 10k/s kSync vs the device's fsync p99"),
        at_least("dispatch_vs_queue_ceiling", 0.25, "dispatch vs raw queue"),
        at_most("backlog_rss_mib", 256, "RSS with the backlog pending (MiB)"),
        at_most("backlog_1m_rss_mib_budget16", 48, "RSS draining 1M events, 16 MiB budget (MiB)"),
        at_most("recovery_first_delivery_ms", 1000, "Open to first delivery (ms)"),
        at_most("outbox_entries_after_catch_up", 10000, "outbox entries after catch-up"),
        at_least("scan_view_vs_rocksdb", 0.9, "ReadView scan vs RocksDB iterator"),
        at_least("scan_merged_vs_plain", 0.5, "scan with 1,000 own writes vs without"),
        at_least("get_view_vs_rocksdb", 0.8, "ReadView Get vs RocksDB Get"),
        at_least("schedule_publish_vs_plain", 0.8, "publish scheduled vs immediate (4 producers)"),
        at_most("timer_lateness_p99_ms", 10, "timer lateness p99 under 10k/s live load (ms)"),
        at_most("timers_10m_rss_mib", 256, "RSS with the timers pending (MiB)"),
        at_least("process_vs_hand_written", 0.8, "process manager vs the same flow by hand (instances/s)"),
        at_most("process_open_1m_rss_mib", 256, "RSS with the instances open (MiB)"),
        at_most("soak_rss_mib_budget16", 40, "RSS at 2,000 events/s, 16 MiB budget (MiB)"),
        at_most("idle_rss_mib_budget8", 12, "idle RSS, the smallest budget (MiB)"),
        at_most("offline_disk_peak_vs_budget", 1, "offline: directory peak over the disk budget"),
        at_most("offline_drain_disk_peak_vs_budget", 1, "offline: directory peak over the disk budget, draining"),
        at_most("offline_rss_mib", 40, "offline: RSS, 16 MiB memory budget (MiB)"),
        at_most("offline_drain_rss_mib", 56, "offline: RSS draining, 16 MiB memory budget (MiB)"),
        at_least("relay_priority_overtakes", 1, "on reconnection the priority level overtakes the backlog"),
        at_most("idle_wakeups_per_s", 1, "idle bus: wake-ups of its threads per second"),
        at_most("disk_write_amplification", 3, "device bytes written per logical byte at 2,000 events/s"),
    ]


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


class Table:
    def __init__(self, title, header):
        self.title, self.header, self.body = title, header, []

    def add(self, *cells):
        self.body.append([c if isinstance(c, str) else fmt(c) for c in cells])

    def text(self):
        widths = [max(len(str(r[i])) for r in [self.header] + self.body) for i in range(len(self.header))]
        line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
        return "\n".join([self.title, line(self.header), line(["-" * w for w in widths])] + [line(r) for r in self.body])

    def markdown(self):
        rows = [self.header, ["---"] + ["---:"] * (len(self.header) - 1)] + self.body
        return f"**{self.title}**\n\n" + "\n".join("| " + " | ".join(str(c) for c in r) + " |" for r in rows)


def tables(res, s):
    eps = "events_per_second"
    out = []
    t = Table("Publish (events/s; one transaction = 100 B domain write + 200 B event)",
              ["durability / producers", "walbus", "raw RocksDB", "SQLite", "walbus/RocksDB", "walbus/SQLite",
               "commits per write"])
    for d in ("buffered", "sync"):
        for p in sorted({int(r["params"]["producers"]) for r in res.rows("Publish", durability=d)}):
            w, r, q = (res.value("Publish", eps, system=x, durability=d, producers=p) for x in ("walbus", "rocksdb", "sqlite"))
            t.add(f"{d} / {p}", w, r, q, ratio(w, r), ratio(w, q),
                  res.value("Publish", "commits_per_write", system="walbus", durability=d, producers=p))
    out.append(t)
    t = Table("End to end (events/s from first commit to last handled; SQLite: outbox + relay; "
              "floor: the same durable work by hand on raw RocksDB)",
              ["durability / subscribers", "walbus", "floor", "SQLite", "walbus/floor", "walbus/SQLite",
               "walbus drain s"])
    for d in ("buffered", "sync"):
        for n in (1, 3):
            w, f, q = (res.value("EndToEnd", eps, system=x, durability=d, subscribers=n)
                       for x in ("walbus", "floor", "sqlite"))
            t.add(f"{d} / {n}", w, f, q, ratio(w, f), ratio(w, q),
                  res.value("EndToEnd", "drain_seconds", system="walbus", durability=d, subscribers=n))
    t.add("buffered / 1, handlers write nothing", res.value("EndToEndNoEffect", eps, system="walbus"), None, None,
          None, None, res.value("EndToEndNoEffect", "drain_seconds", system="walbus"))
    out.append(t)
    t = Table("Latency, publish to handler, open loop (us)",
              ["durability / offered events/s", "p50", "p99", "p99.9", "max", "late sends"])
    for r in sorted(res.rows("Latency"), key=lambda r: (r["params"]["durability"], int(r["params"]["rate_eps"]))):
        c = r["counters"]
        t.add(f"{r['params']['durability']} / {r['params']['rate_eps']}", c.get("p50_us"), c.get("p99_us"),
              c.get("p999_us"), c.get("max_us"), c.get("late_sends"))
    out.append(t)
    t = Table("Dispatch ceiling (events/s)", ["path", "events/s", "vs raw queue"])
    for label, system, path in (("walbus, no-op handler (tmpfs)", "walbus", "handler"),
                                ("walbus, filtered out (no handler)", "walbus", "filtered"),
                                ("moodycamel queue 1P1C", "queue", "spsc")):
        v = res.value("Dispatch", eps, system=system, path=path)
        t.add(label, v, ratio(v, s["queue_eps"]))
    out.append(t)
    t = Table("Backlog and recovery", ["measure", "value"])
    for label, key in (("events pending", "backlog_events"), ("disk with the backlog, MiB", "backlog_disk_mib"),
                       ("RSS peak while draining, MiB", "backlog_rss_mib"),
                       ("events pending, 16 MiB memory budget", "backlog_events_budget16"),
                       ("RSS peak while draining them, MiB", "backlog_1m_rss_mib_budget16"),
                       ("Open, ms", "recovery_open_ms"),
                       ("Open to first delivery, ms", "recovery_first_delivery_ms"),
                       ("Open to caught up, s", "recovery_catch_up_seconds"),
                       ("catch-up events/s", "recovery_catch_up_eps"),
                       ("catch-up events/s, 3 subscribers", "backlog_3subs_eps"),
                       ("  vs 1 subscriber", "backlog_3subs_vs_1sub"),
                       ("outbox entries after catch-up", "outbox_entries_after_catch_up"),
                       ("outbox table files after catch-up, MiB", "outbox_sst_mib_after_catch_up")):
        t.add(label, s.get(key))
    out.append(t)
    t = Table("Scaling, end to end kBuffered, 1 subscriber", ["point", "events/s", "payload MiB/s", "RSS peak MiB"])
    for r in res.rows("Scaling"):
        c, p = r["counters"], r["params"]
        label = f"subjects {p['subjects']}" if "subjects" in p else f"payload {p['payload_bytes']} B"
        t.add(label, c.get(eps), c.get("payload_mib_per_second"), c.get("rss_peak_mib"))
    out.append(t)
    t = Table("Reads of state (rows/s; the same column family read by walbus and by RocksDB's own calls)",
              ["read", "walbus", "baseline", "ratio"])
    rows_per_second = lambda system, path: res.value("Scan", "rows_per_second", system=system, path=path)
    for label, walbus_path, base_system, base_path in (
            ("scan, ReadView vs RocksDB iterator", "view", "rocksdb", "iterator"),
            ("scan in a transaction, 1,000 own writes vs none", "merged", "walbus", "transaction"),
            ("point Get, ReadView vs RocksDB Get", "get", "rocksdb", "get")):
        w, b = rows_per_second("walbus", walbus_path), rows_per_second(base_system, base_path)
        t.add(label, w, b, ratio(w, b))
    out.append(t)
    t = Table("Timers (scheduled events)", ["measure", "value"])
    for label, key in (("publish scheduled vs immediate, 4 producers", "schedule_publish_vs_plain"),
                       ("fire, timers due at once, events/s", "timer_fire_eps"),
                       ("lateness p99 under 10k/s live, ms", "timer_lateness_p99_ms"),
                       ("timers pending", "timers_pending"),
                       ("RSS with them pending, MiB", "timers_10m_rss_mib")):
        t.add(label, s.get(key))
    out.append(t)
    t = Table("Process managers", ["measure", "value"])
    for label, key in (("three-step flow, instances/s", "process_flow_instances_per_second"),
                       ("vs the same flow by hand", "process_vs_hand_written"),
                       ("instances open", "process_open_instances"),
                       ("RSS with them open, MiB", "process_open_1m_rss_mib"),
                       ("read one instance, us", "process_read_one_us")):
        t.add(label, s.get(key))
    out.append(t)
    t = Table("Devices", ["measure", "value"])
    t.add("soak seconds at 2,000 events/s, 16 MiB budget", s.get("soak_seconds_budget16"))
    t.add("RSS peak in it, MiB", s.get("soak_rss_mib_budget16"))
    t.add("RSS growth after its first quarter, MiB", s.get("soak_rss_growth_after_warmup_mib_budget16"))
    t.add("  of it anonymous (heap, stacks), MiB", s.get("soak_anon_rss_mib_budget16"))
    t.add("device bytes written per logical byte in it", s.get("soak_disk_write_amplification_budget16"))
    t.add("idle bus RSS, 8 MiB budget, MiB", s.get("idle_rss_mib_budget8"))
    t.add("  of it anonymous (heap, stacks), MiB", s.get("idle_anon_rss_mib_budget8"))
    t.add("idle bus, wake-ups of its threads per second", s.get("idle_wakeups_per_s"))
    t.add("device bytes written per logical byte, 2,000 events/s", s.get("disk_write_amplification"))
    t.add("  the same within a 16 MiB budget", s.get("disk_write_amplification_budget16"))
    t.add("offline until the disk budget refuses: budget, MiB", s.get("offline_disk_budget_mib"))
    t.add("  directory peak over the budget, offline", s.get("offline_disk_peak_vs_budget"))
    t.add("  RSS peak offline, 16 MiB memory budget, MiB", s.get("offline_rss_mib"))
    t.add("  directory peak over the budget, draining", s.get("offline_drain_disk_peak_vs_budget"))
    t.add("  RSS peak draining, MiB", s.get("offline_drain_rss_mib"))
    t.add("  heap peak offline / draining, MiB",
          f"{fmt(s.get('offline_heap_mib'))} / {fmt(s.get('offline_drain_heap_mib'))}")
    t.add("  events committed before it refused", s.get("offline_committed_events"))
    t.add("  drain rate, events/s", s.get("offline_drain_events_per_second"))
    t.add("  acknowledgements all sent, readings still waiting", s.get("relay_readings_waiting_when_acks_done"))
    t.add("  priority overtook the backlog", s.get("relay_priority_overtakes"))
    out.append(t)
    return out


def machine():
    info = {"cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_mib"] = int(f.readline().split()[1]) // 1024
    except OSError:
        pass
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="profile", const="quick")
    size.add_argument("--smoke", action="store_const", dest="profile", const="smoke")
    ap.add_argument("--only", help="comma-separated groups: " + ",".join([g for g, _ in GROUPS] + list(STRESS_GROUPS)))
    ap.add_argument("--build-dir", default=os.environ.get("WALBUS_BUILD_DIR", "build"))
    args = ap.parse_args()
    profile = args.profile or "full"
    selected = [g for g, _ in GROUPS] + list(STRESS_GROUPS)
    if args.only:
        selected = [g.strip() for g in args.only.split(",")]
        unknown = set(selected) - {g for g, _ in GROUPS} - set(STRESS_GROUPS)
        if unknown:
            ap.error(f"unknown group(s): {', '.join(sorted(unknown))}")

    bench = os.path.join(args.build_dir, "bin", "bus_bench")
    out_dir = os.path.join(args.build_dir, "bench")
    group_dir = os.path.join(out_dir, profile)
    os.makedirs(group_dir, exist_ok=True)
    for group, prefix in GROUPS:
        if group in selected:
            run_group(bench, profile, group, prefix, os.path.join(group_dir, group + ".json"))
    for group in STRESS_GROUPS:
        if group in selected:
            run_stress(args.build_dir, profile, group, os.path.join(group_dir, group + ".json"))

    groups = {}
    for group, _ in GROUPS:
        path = os.path.join(group_dir, group + ".json")
        if not os.path.exists(path):
            raise SystemExit(f"no {profile} results for group '{group}': run it (--only {group})")
        groups[group] = load_group(path)
    stress_results = {}
    for group in STRESS_GROUPS:
        path = os.path.join(group_dir, group + ".json")
        if not os.path.exists(path):
            raise SystemExit(f"no {profile} results for group '{group}': run it (--only {group})")
        stress_results[group] = load_stress(path)
    res = Results(groups, stress_results)
    s = summarize(res)
    missing = [k for k in REQUIRED_KEYS if not isinstance(s.get(k), (int, float))]
    if missing:
        raise SystemExit(f"summary keys without a value: {', '.join(missing)}")

    ts = tables(res, s)
    goals = targets(s)
    goal_table = Table("Targets", ["target", "value", "bound", "met"])
    for what, _, v, bound, met in goals:
        goal_table.add(what, v, bound, "met" if met else "MISSED")
    for t in ts + [goal_table]:
        print("\n" + t.text())
    if profile != "full":
        print(f"\n(the targets are stated for the full profile; the {profile} profile's sizes only indicate them)")

    summary = dict(s)
    summary["profile"] = profile
    summary["generated_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    summary["machine"] = machine()
    summary["targets"] = {key: {"value": v, "bound": bound, "met": met} for _, key, v, bound, met in goals}
    summary["groups"] = {g: {"date": groups[g]["context"].get("date"), "rows": groups[g]["rows"]} for g in groups}
    summary["stress"] = stress_results
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n\n".join(t.markdown() for t in ts + [goal_table]) + "\n")
    print(f"\nwrote {os.path.join(out_dir, 'summary.json')} and summary.md ({profile} profile)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
