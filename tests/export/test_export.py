#!/usr/bin/env python3
"""'heaptrail export', 'diff', 'analyze --at-peak/--temporary' and info's
temporary counts on tests/programs/peak_prog, whose heap is known exactly
(see its header): each format is read by the tool it is for.

usage: test_export.py HEAPTRAIL PEAK_PROG MALLOC_FAMILY MMAP_OPS SPAWN_TREE MEMTESTAPP
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HEAPTRAIL, PROG, MALLOC_FAMILY, MMAP_OPS, SPAWN_TREE, MEMTESTAPP = sys.argv[1:7]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import SoftChecks  # noqa: E402

CHECKS = SoftChecks()
check = CHECKS.check


# The program's numbers (tests/programs/peak_prog.c), for scale n.
def peak_bytes(n): return 10000 * n + 100000 + 900
def leaked_bytes(n): return 1000 * (10 * n - 5) + 900
def leaked_count(n): return 10 * n - 2



def run(*args, ok=True):
    p = subprocess.run([*args], capture_output=True)
    if ok:
        check(p.returncode == 0, f"{args}: exit {p.returncode}, {p.stderr.decode()!r}")
    return p


def ht(*args, ok=True):
    return run(HEAPTRAIL, *args, ok=ok)


def ht_json(*args):
    p = ht(*args, "--format", "json")
    return json.loads(p.stdout) if p.returncode == 0 else {}


tmp = tempfile.mkdtemp(prefix="ht-test-export-")
env_home = os.path.join(tmp, "home")
os.makedirs(env_home)
try:
    t1, t2 = os.path.join(tmp, "p1.htr"), os.path.join(tmp, "p2.htr")
    # Exact times: no two events share a time stamp, so "live at the peak's
    # time" is exactly the state after the peak's allocation.
    for t, scale in ((t1, "1"), (t2, "2")):
        ht("record", "--time-resolution", "1ns", "-o", t, "--", PROG, scale)
    info = ht_json("info", t1)
    tot = info["totals"]
    check((tot["peak_bytes"], tot["leaked_bytes"], tot["leaked_count"])
          == (peak_bytes(1), leaked_bytes(1), leaked_count(1)), f"info totals {tot}")

    # --- temporary allocations: 5 blocks of 64 bytes from make_temps.
    check((tot["temporary_count"], tot["temporary_bytes"]) == (5, 320), f"temporary {tot}")
    check(info["processes"][0]["temporary_count"] == 5, f"per process {info['processes'][0]}")
    d = ht_json("analyze", t1, "-frames", "--temporary")
    check([(i["frame"], i["total_count"], i["total_bytes"]) for i in d["items"]]
          == [("peak_prog!make_temps", 5, 320)], f"analyze --temporary {d.get('items')}")

    # --- the peak: every block live after the third leak block.
    d = ht_json("analyze", t1, "-frames", "--at-peak")
    got = {i["frame"]: (i["outstanding_count"], i["outstanding_bytes"]) for i in d["items"]}
    check(got == {"peak_prog!make_peak": (1, 100000), "peak_prog!grow_buffers": (10, 10000),
                  "peak_prog!make_leak": (3, 900)}, f"--at-peak frames {got}")
    check(d["totals"]["outstanding_bytes"] == tot["peak_bytes"], f"--at-peak totals {d['totals']}")
    pid = str(info["processes"][0]["pid"])
    d = ht_json("analyze", t1, "-pid", pid, "--at-peak")
    check(d["totals"]["outstanding_bytes"] == peak_bytes(1), f"--at-peak -pid {d.get('totals')}")
    # table heap --at-peak: the window [0, peak]; its Impacting rows are the blocks live then.
    d = ht_json("table", "heap", t1, "--at-peak", "--group-by", "impacting-type")
    check(d.get("window", {}).get("end_ns") == tot["peak_time_ns"] + 1 and
          [(g["impacting_type"], g["count"], g["impacting_size"]) for g in d["groups"]]
          == [("Impacting", 14, peak_bytes(1)), ("Transient", 5, 0)], f"table --at-peak {d}")
    p = ht("analyze", t1, "--at-peak", "-range", "0", "1s", ok=False)
    check(p.returncode == 2 and b"--at-peak" in p.stderr, f"--at-peak with -range: {p.stderr!r}")

    # --- collapsed: flamegraph.pl's input, root first, bytes of the metric.
    line_re = re.compile(r"^[^; ][^;]*(;[^;]+)* [0-9]+$")
    for metric, want in (("outstanding", {"grow_buffers": 5000, "make_leak": 900}),
                         ("total", {"grow_buffers": 10000, "make_leak": 900,
                                    "make_peak": 100000, "make_temps": 320}),
                         ("peak", {"grow_buffers": 10000, "make_leak": 900,
                                   "make_peak": 100000})):
        out = ht("export", t1, "--format", "collapsed", "--metric", metric, "-o", "-").stdout.decode()
        lines = out.splitlines()
        check(all(line_re.match(l) for l in lines), f"collapsed {metric} syntax: {lines}")
        got = {}
        for l in lines:
            stack, value = l.rsplit(" ", 1)
            frames = stack.split(";")
            check(frames[0] == "_start" and frames[-2] == "main", f"root first: {l}")
            got[frames[-1]] = got.get(frames[-1], 0) + int(value)
        check(got == want, f"collapsed {metric}: {got}, want {want}")
    out = ht("export", t1, "--format", "collapsed", "--modules", "-o", "-").stdout.decode()
    check(out.splitlines()[0].startswith("peak_prog!_start;libc.so.6!__libc_start_main;"),
          f"--modules {out!r}")
    # Nothing to show (no block of 1 byte): an empty output, and stderr says why.
    p = ht("export", t1, "--format", "collapsed", "-size", "1", "2", "-o", "-")
    check(p.stdout == b"" and b"the output is empty: no stack holds bytes by --metric "
          b"outstanding" in p.stderr, f"empty collapsed: {p.stdout!r} {p.stderr!r}")
    p = ht("export", t1, "--format", "collapsed", "-o", "-")
    check(b"empty" not in p.stderr, f"collapsed with stacks: {p.stderr!r}")
    # A file is written, and not replaced without --force.
    cf = os.path.join(tmp, "out.collapsed")
    ht("export", t1, "--format", "collapsed", "-o", cf)
    check(os.path.getsize(cf) > 0, "collapsed -o FILE is written")
    p = ht("export", t1, "--format", "collapsed", "-o", cf, ok=False)
    check(p.returncode == 2 and b"--force" in p.stderr, f"existing output: {p.stderr!r}")
    ht("export", t1, "--format", "collapsed", "-o", cf, "--force")
    p = ht("export", t1, "--format", "nope", "-o", "-", ok=False)
    check(p.returncode == 2 and b"unknown export format" in p.stderr, f"bad format {p.stderr!r}")

    # --- pprof, read by go tool pprof: exact values per sample (-raw).
    def pprof_raw(path):
        env = dict(os.environ, HOME=env_home, GOCACHE=os.path.join(env_home, "gocache"),
                   PPROF_TMPDIR=tmp)
        p = subprocess.run(["go", "tool", "pprof", "-raw", path], capture_output=True,
                           text=True, env=env)
        check(p.returncode == 0, f"go tool pprof -raw: {p.stderr!r}")
        samples, locs, section = [], {}, None
        for l in p.stdout.splitlines():
            if l.startswith(("Samples:", "Locations", "Mappings")):
                section = l.split()[0].rstrip(":")
                continue
            if section == "Samples" and ":" in l and l.strip()[0].isdigit() or \
               section == "Samples" and l.strip().startswith("-"):
                vals, ids = l.split(":", 1)
                samples.append(([int(v) for v in vals.split()], ids.split()))
            elif section == "Locations" and re.match(r"^\s*\d+: 0x", l):
                lid, rest = l.split(":", 1)
                locs[lid.strip()] = rest.split()[2]  # 0xADDR M=1 FUNCTION file:line
                # (the inlined functions' lines follow, indented, without an id)
        return p.stdout, samples, locs

    pf = os.path.join(tmp, "p1.pb.gz")
    ht("export", t1, "--format", "pprof", "-o", pf)
    with open(pf, "rb") as f:
        check(f.read(2) == b"\x1f\x8b", "pprof is gzipped")
    text, samples, locs = pprof_raw(pf)
    check("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]"
          in text, f"sample types: {text[:400]!r}")
    got = {locs[ids[0]]: vals for vals, ids in samples}
    check(got == {"grow_buffers": [10, 10000, 5, 5000], "make_leak": [3, 900, 3, 900],
                  "make_peak": [1, 100000, 0, 0], "make_temps": [5, 320, 0, 0]},
          f"pprof samples {got}")
    check(re.search(r"peak_prog [0-9a-f]{40} \[FN\]\[FL\]\[LN\]\[IN\]", text) is not None,
          "pprof mapping with build-id")
    check(re.search(r"grow_buffers \S*peak_prog\.c:\d+", text) is not None, "file:line")
    # Labels for Pyroscope and Parca: host, exe, build_id, pid on every sample.
    p = subprocess.run(["go", "tool", "pprof", "-raw", pf], capture_output=True, text=True,
                       env=dict(os.environ, HOME=env_home, GOCACHE=os.path.join(env_home, "gc")))
    labels = re.findall(r"^\s+build_id:\[([0-9a-f]{40})\] exe:\[(\S+)\] host:\[(\S+)\]\n"
                        r"\s+pid:\[(\d+)\]$", p.stdout, re.M)
    check(len(labels) == 4 and all(l[1].endswith("/peak_prog") and l[3] == pid and
                                   l[2] == info["hostname"] for l in labels),
          f"pprof labels {labels} {p.stdout[:600]!r}")
    # One process tree: each pid's samples hold that pid's leaks.
    ts = os.path.join(tmp, "tree.htr")
    ht("record", "--time-resolution", "1ns", "-o", ts, "--", SPAWN_TREE)
    # The peak of a process tree: what the processes running then held together.
    tree_tot = ht_json("info", ts)["totals"]
    d = ht_json("analyze", ts, "--at-peak")
    check(d.get("totals", {}).get("outstanding_bytes") == tree_tot["peak_bytes"],
          f"--at-peak of a process tree {d.get('totals')} vs info {tree_tot['peak_bytes']}")
    want = {}
    for pr in ht_json("info", ts)["processes"]:
        want[str(pr["pid"])] = want.get(str(pr["pid"]), 0) + pr["leaked_bytes"]
    pt = os.path.join(tmp, "tree.pb.gz")
    ht("export", ts, "--format", "pprof", "-o", pt)
    text, samples, locs = pprof_raw(pt)
    got, cur = {}, None
    for l in text.splitlines():
        m = re.match(r"^\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+):", l)
        if m:
            cur = int(m.group(4))
        m = re.match(r"^\s+pid:\[(\d+)\]", l)
        if m and cur is not None:
            got[m.group(1)] = got.get(m.group(1), 0) + cur
            cur = None
    check(len(want) == 4 and got == {k: v for k, v in want.items() if v},
          f"pprof inuse by pid label {got}, info {want}")
    # The difference, as -diff_base shows it: scale 2 holds 10 more blocks.
    pd = os.path.join(tmp, "d.pb.gz")
    ht("export", t2, "--base", t1, "--format", "pprof", "-o", pd)
    text, samples, locs = pprof_raw(pd)
    net = {}
    for vals, ids in samples:
        n = net.setdefault(locs[ids[0]], [0, 0, 0, 0])
        for k in range(4):
            n[k] += vals[k]
    check(net.get("grow_buffers") == [10, 10000, 10, 10000] and
          all(v == [0, 0, 0, 0] for k, v in net.items() if k != "grow_buffers"),
          f"pprof --base net values {net}")
    env = dict(os.environ, HOME=env_home, GOCACHE=os.path.join(env_home, "gocache"))
    p = subprocess.run(["go", "tool", "pprof", "-top", "-unit=B", pd], capture_output=True,
                       text=True, env=env)
    check(re.search(r"^\s*10000B\s.*grow_buffers$", p.stdout, re.M) is not None,
          f"pprof -top of the diff: {p.stdout!r}")

    # --- diff: two runs, matched by symbolized frames.
    d = ht_json("diff", t1, t2)
    items = d["items"]
    check(set(items[0]) == {"stack", "base_bytes", "new_bytes", "delta_bytes", "base_count",
                            "new_count", "delta_count"}, f"diff item fields {items[0]}")
    check(items[0]["stack"][0] == "peak_prog!grow_buffers" and
          (items[0]["base_bytes"], items[0]["new_bytes"], items[0]["delta_bytes"],
           items[0]["base_count"], items[0]["new_count"], items[0]["delta_count"])
          == (5000, 15000, 10000, 5, 15, 10), f"diff first item {items[0]}")
    check([(i["stack"][0], i["delta_bytes"]) for i in items[1:]] == [("peak_prog!make_leak", 0)],
          f"diff other items {items[1:]}")
    d = ht_json("diff", t2, t1, "-frames", "--metric", "total")
    check([(i["frame"], i["delta_bytes"], i["delta_count"]) for i in d["items"]][0]
          == ("peak_prog!grow_buffers", -10000, -10), f"diff reversed, total {d['items']}")
    d = ht_json("diff", t1, t2, "-frames", "--metric", "peak")
    check({i["frame"]: (i["base_bytes"], i["new_bytes"]) for i in d["items"]}
          == {"peak_prog!grow_buffers": (10000, 20000), "peak_prog!make_peak": (100000, 100000),
              "peak_prog!make_leak": (900, 900)}, f"diff peak {d['items']}")
    # Two windows of one trace: before the peak and from it to the end.
    peak_ns = tot["peak_time_ns"]
    d = ht_json("diff", t1, "-frames", "--metric", "total", "--base-range", "0", f"{peak_ns}ns",
                "-range", f"{peak_ns}ns", "10s")
    got = {i["frame"]: (i["base_count"], i["new_count"]) for i in d["items"]}
    check(got == {"peak_prog!grow_buffers": (10, 0), "peak_prog!make_peak": (1, 0),
                  "peak_prog!make_temps": (5, 0), "peak_prog!make_leak": (2, 1)},
          f"diff of windows {got}")
    p = ht("diff", t1, "--format", "csv", "-images", t2)
    rows = p.stdout.decode().splitlines()
    check(rows[0] == "delta_bytes,base_bytes,new_bytes,delta_count,base_count,new_count,image"
          and rows[1] == "10000,5900,15900,10,8,18,peak_prog", f"diff csv {rows}")
    # --- sqlite, read by the sqlite3 CLI: the blocks never freed are info's leaks.
    def sql(db, query):
        p = run("sqlite3", "-batch", "-separator", "|", db, query)
        return p.stdout.decode().strip()

    db = os.path.join(tmp, "p1.db")
    ht("export", t1, "--format", "sqlite", "-o", db)
    leaked = "SELECT count(*), sum(size) FROM allocations WHERE free_ns IS NULL OR at_exit = 1"
    check(sql(db, leaked) == f"{tot['leaked_count']}|{tot['leaked_bytes']}", "sqlite leaks = info's")
    # What the program still held at its exit ends there (the tables' rule): nothing is live
    # after the exit of the only process, and no at_exit block has another end.
    check(sql(db, "SELECT count(*) FROM allocations WHERE free_ns IS NULL") == "0",
          "sqlite: no block outlives its process")
    check(tot["leaked_count"] > 0 and
          sql(db, "SELECT count(DISTINCT free_ns) FROM allocations WHERE at_exit = 1") == "1",
          "sqlite: the leaks end at the one exit")
    check(sql(db, "SELECT count(*), sum(size) FROM allocations") == "19|111220",
          "sqlite: every allocation")
    # Who held the peak, in SQL: the blocks live at info's peak time.
    check(sql(db, f"SELECT sum(size) FROM allocations WHERE alloc_ns <= {peak_ns} AND "
                  f"(free_ns IS NULL OR free_ns > {peak_ns})") == str(tot["peak_bytes"]),
          "sqlite: live at the peak")
    check(sql(db, "SELECT f.function FROM allocations a JOIN stacks s ON s.stack_id = a.stack_id"
                  " JOIN frames f ON f.frame = s.frame WHERE a.size = 100000 ORDER BY s.depth")
          .splitlines()[:2] == ["make_peak", "main"], "sqlite: stack of the peak block")
    check(sql(db, "SELECT pid, exe LIKE '%peak_prog' FROM processes") == f"{pid}|1",
          "sqlite processes")
    check(sql(db, "SELECT count(*) FROM threads WHERE pid = tid") == "1", "sqlite threads")
    check(sql(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                  "name IN ('allocations_alloc', 'allocations_stack')") == "2", "sqlite indexes")
    p = ht("export", t1, "--format", "sqlite", "-o", "-", ok=False)
    check(p.returncode == 2 and b"standard output" in p.stderr, f"sqlite to -: {p.stderr!r}")
    # realloc chains: 100 -> 200 -> 400 -> 800, each row naming the one it replaced.
    tm = os.path.join(tmp, "mf.htr")
    ht("record", "-o", tm, "--", MALLOC_FAMILY)
    dbm = os.path.join(tmp, "mf.db")
    ht("export", tm, "--format", "sqlite", "-o", dbm)
    check(sql(dbm, "SELECT b.size, a.size FROM allocations a JOIN allocations b ON "
                   "b.id = a.realloc_from WHERE b.free_ns = a.alloc_ns ORDER BY a.id")
          .splitlines() == ["100|200", "200|400", "400|800"], "sqlite realloc_from chain")
    info_m = ht_json("info", tm)["totals"]
    check(sql(dbm, leaked) == f"{info_m['leaked_count']}|{info_m['leaked_bytes']}",
          "sqlite leaks = info's (mf)")

    # --- massif, read by ms_print: the peak snapshot holds info's peak and its tree.
    mf = os.path.join(tmp, "massif.out")
    ht("export", t1, "--format", "massif", "-o", mf)
    text = open(mf).read()
    snaps = re.findall(r"snapshot=(\d+)\n#-+\ntime=(\d+)\nmem_heap_B=(\d+)\n"
                       r"mem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=(\w+)", text)
    check(len(snaps) >= 20 and [int(s[0]) for s in snaps] == list(range(len(snaps))),
          f"massif snapshots numbered: {snaps[:3]}")
    check([int(s[1]) for s in snaps] == sorted(int(s[1]) for s in snaps), "massif times grow")
    peaks = [s for s in snaps if s[3] == "peak"]
    check(len(peaks) == 1 and int(peaks[0][2]) == tot["peak_bytes"] and
          max(int(s[2]) for s in snaps) == tot["peak_bytes"], f"massif peak {peaks}")
    p = run("ms_print", mf)
    out = p.stdout.decode()
    check(re.search(r"->90\.17% \(100,000B\) 0x[0-9a-f]+: make_peak \(\S*peak_prog\.c:\d+\)", out)
          is not None, f"ms_print tree: make_peak {out[-1500:]!r}")
    check(re.search(r"->09\.02% \(10,000B\) 0x[0-9a-f]+: grow_buffers", out) is not None,
          "ms_print tree: grow_buffers")
    check("(900B) in 1+ places, all below ms_print's threshold" in out, "ms_print threshold line")
    check(f"Number of snapshots: {len(snaps)}" in out and
          f"Detailed snapshots: [{peaks[0][0] if peaks else '?'} (peak)]" in out,
          "ms_print's snapshot summary")

    # --- perfetto: valid JSON, counters ("ph":"C") whose highest values are the peaks.
    def perfetto(trace):
        p = ht("export", trace, "--format", "perfetto", "-o", "-")
        try:
            return json.loads(p.stdout)["traceEvents"]
        except ValueError as e:
            check(False, f"perfetto JSON: {e}")
            return []

    ev = perfetto(t1)
    heap = [e for e in ev if e["ph"] == "C" and e["name"] == "heap"]
    check(heap and all(e["pid"] == int(pid) for e in heap), f"perfetto heap counters {heap[:2]}")
    check(max(e["args"]["bytes"] for e in heap) == tot["peak_bytes"], "perfetto heap peak")
    check([e["ts"] for e in heap] == sorted(e["ts"] for e in heap), "perfetto times in order")
    check(sorted(e["name"] for e in ev if e["ph"] == "i") == ["process end", "process start"],
          "perfetto instants")
    check([e["args"]["name"] for e in ev if e["ph"] == "M"][0].endswith("peak_prog"),
          "perfetto process name")
    tmm = os.path.join(tmp, "mm.htr")
    ht("record", "-o", tmm, "--", MMAP_OPS)
    ev = perfetto(tmm)
    committed = [e["args"]["bytes"] for e in ev if e["ph"] == "C" and e["name"] == "committed"]
    check(committed and max(committed) == ht_json("info", tmm)["totals"]["committed_peak_bytes"],
          f"perfetto committed peak {committed}")

    # RSS: a run long enough for the session's samples; one counter event each.
    tmt = os.path.join(tmp, "mt.htr")
    ht("record", "-o", tmt, "--", MEMTESTAPP, "--seconds", "1")
    nrss = ht_json("info", tmt)["events"]["rss"]
    ev = perfetto(tmt)
    rss = [e for e in ev if e["ph"] == "C" and e["name"] == "rss"]
    check(nrss > 0 and len(rss) == nrss and all(e["args"]["bytes"] > 0 for e in rss),
          f"perfetto rss counters {len(rss)} of {nrss} samples")

    # profile.proto: mapping[0] is the main binary (pprof's "File:"), also
    # when the largest stack ends in a library (memtestapp's, libstdc++'s
    # operator new: it used to come first).
    pm = os.path.join(tmp, "mt.pb.gz")
    ht("export", tmt, "--format", "pprof", "--metric", "total", "-o", pm)
    text, samples, locs = pprof_raw(pm)
    maps = text.split("Mappings\n", 1)[-1].splitlines()
    check(maps and re.match(r"^1: \S+ %s " % re.escape(os.path.realpath(MEMTESTAPP)), maps[0])
          and any("libstdc++" in m for m in maps), f"pprof mappings {maps}")

    p = ht("diff", t1, ok=False)
    check(p.returncode == 2 and b"--base-range" in p.stderr, f"diff one trace: {p.stderr!r}")
finally:
    shutil.rmtree(tmp)

sys.exit(CHECKS.done())
