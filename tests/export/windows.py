#!/usr/bin/env python3
"""The exports over a time window and over several processes: pprof's time
and duration are the window's (read back by go tool pprof and by decoding
the profile's own fields), perfetto keeps a pid's images before and after
exec apart, and the sqlite and massif exports count what table heap,
analyze and info count for the same window and processes.

Programs: tests/programs/peak_prog (known peak) and exec_chain (one pid with
two images, and a child that ends with _exit without exec)."""
import calendar
import gzip
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import Cases, Failure, case_main, check, equal  # noqa: E402

CASES = Cases()
case = CASES


class Env:
    def __init__(self, build, src, tmp):
        self.tmp = tmp
        self.bin = os.path.join(build, "bin", "heaptrail")
        self.progs = os.path.join(build, "tests", "programs")
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        self.env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "gocache"),
                        PPROF_TMPDIR=tmp)

    def run(self, args, want=0):
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           cwd=self.tmp, env=self.env, timeout=240)
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        if want is not None and p.returncode != want:
            raise Failure("%s: exit %d, want %d:\n%s" % (" ".join(args), p.returncode, want, err))
        return out, err

    def ht(self, *args, want=0):
        return self.run([self.bin] + list(args), want=want)

    def json(self, *args):
        return json.loads(self.ht(*args, "--format", "json")[0])

    def record(self, prog, *argv):
        path = os.path.join(self.tmp, prog + ".htr")
        self.ht("record", "--time-resolution", "1ns", "-o", path, "--",
                os.path.join(self.progs, prog), *argv)
        return path


def varint(b, i):
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def profile_times(path):
    """time_nanos (field 9) and duration_nanos (field 10) of a gzipped profile.proto."""
    b = gzip.open(path).read()
    i, got = 0, {9: 0, 10: 0}
    while i < len(b):
        key, i = varint(b, i)
        wire = key & 7
        if wire == 0:
            v, i = varint(b, i)
            if key >> 3 in got:
                got[key >> 3] = v
        elif wire == 2:
            n, i = varint(b, i)
            i += n
        else:
            raise Failure("unexpected wire type %d in %s" % (wire, path))
    return got[9], got[10]


def pprof_raw(env, path):
    """go tool pprof -raw: (its Time in ns, its Duration text, {innermost function: values})."""
    out, _ = env.run(["go", "tool", "pprof", "-raw", path])
    # Go prints the fraction without its trailing zeros (none when whole).
    m = re.search(r"^Time: (\d+-\d+-\d+ \d+:\d+:\d+)(?:\.(\d{1,9}))? \+0000 UTC$", out, re.M)
    check(m, "pprof -raw prints the time: %r" % out[:300])
    ns = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) * 10**9 + \
        int((m.group(2) or "").ljust(9, "0"))
    d = re.search(r"^Duration: (\S+)$", out, re.M)
    samples, locs, section = [], {}, None
    for line in out.splitlines():
        if line.startswith(("Samples:", "Locations", "Mappings")):
            section = line.split()[0].rstrip(":")
        elif section == "Samples" and re.match(r"^\s+-?\d+(\s+-?\d+)*:", line):
            vals, ids = line.split(":", 1)
            samples.append(([int(v) for v in vals.split()], ids.split()))
        elif section == "Locations" and re.match(r"^\s+\d+:", line):
            lid, rest = line.split(":", 1)
            locs[lid.strip()] = rest.split()[2]
    by_fn = {}
    for vals, ids in samples:
        acc = by_fn.setdefault(locs[ids[0]], [0, 0, 0, 0])
        for k in range(4):
            acc[k] += vals[k]
    return ns, d.group(1) if d else None, by_fn


@case
def pprof_window(env):
    """(a) pprof under -range: Time and Duration are the window's, and the
    samples are analyze's for that window."""
    t = env.record("peak_prog", "1")
    info = env.json("info", t)
    start, dur, peak = info["start_realtime_ns"], info["duration_ns"], info["totals"]["peak_time_ns"]
    check(dur > 3_000_000, "the trace lasts over 3 ms: %d ns" % dur)
    out = os.path.join(env.tmp, "w.pb.gz")

    def export(*args):
        env.ht("export", t, "--format", "pprof", "--metric", "total", "-o", out, "--force", *args)
        return out

    # A window inside the trace: go tool pprof shows its start and its length.
    ns, d, _ = pprof_raw(env, export("-range", "1ms", "3ms"))
    equal((ns - start, d), (1_000_000, "2ms"), "pprof -range 1ms 3ms: Time - start, Duration")
    equal(profile_times(out), (start + 1_000_000, 2_000_000), "time_nanos, duration_nanos")
    # A window past the end of the trace ends with it.
    equal(profile_times(export("-range", "%dns" % peak, "1000s")), (start + peak, dur - peak),
          "pprof -range PEAK 1000s")
    # The samples of a window are analyze's for the same window.
    _, _, fns = pprof_raw(env, export("-range", "0", "%dns" % (peak + 1)))
    a = env.json("analyze", t, "-frames", "-range", "0", "%dns" % (peak + 1))
    want = {i["frame"].split("!")[1]: [i["total_count"], i["total_bytes"],
                                       i["outstanding_count"], i["outstanding_bytes"]]
            for i in a["items"]}
    equal(fns, want, "pprof samples = analyze -frames for [0, peak]")
    equal(fns["make_peak"], [1, 100000, 1, 100000], "the peak block is live at the window's end")
    # A window after the end holds nothing, and the commands say why.
    _, err = env.ht("export", t, "--format", "pprof", "-o", out, "--force", "-range", "1000s", "1001s")
    equal(profile_times(out), (start + dur, 0), "pprof -range after the end")
    for argv in (["export", t, "--format", "sqlite", "-o", os.path.join(env.tmp, "e.db")],
                 ["analyze", t], ["export", t, "--format", "pprof", "-o", out, "--force"]):
        _, err = env.ht(*argv, "-range", "1000s", "1001s")
        check("warning: the range starts at 1000.000000 s, after the end of '%s'" % t in err,
              "%s -range after the end warns: %r" % (argv[0], err))
    # The peak is a moment; the whole trace its duration.
    env.ht("export", t, "--format", "pprof", "--metric", "peak", "-o", out, "--force")
    equal(profile_times(out), (start + peak, 0), "pprof --metric peak")
    equal(profile_times(export()), (start, dur), "pprof, whole trace")


def exec_chain(env):
    t = env.record("exec_chain")
    procs = env.json("info", t)["processes"]
    equal(len(procs), 3, "exec_chain's images: %r" % [(p["pid"], p.get("flags")) for p in procs])
    return t, procs


@case
def perfetto_exec(env):
    """(b) perfetto: the image after exec has tracks of its own (the first
    image's keep the plain names); the pid is named once, by both images."""
    t, procs = exec_chain(env)
    pid, child = procs[0]["pid"], procs[1]["pid"]
    equal(procs[2]["pid"], pid, "the exec'd image keeps the pid")
    out, _ = env.ht("export", t, "--format", "perfetto", "-o", "-")
    ev = json.loads(out)["traceEvents"]
    exe = procs[0]["exe"]
    names = [(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M"]
    equal(sorted(names), sorted([(pid, exe + " -> " + exe), (child, exe)]), "process_name")
    second = "heap (image 2: %s)" % os.path.basename(exe)
    tracks = {}  # the heap's (committed and rss come when the session sampled in time)
    for e in ev:
        if e["ph"] == "C" and e["name"].startswith("heap"):
            tracks.setdefault((e["pid"], e["name"]), []).append(e["args"]["bytes"])
    check({e["name"] for e in ev if e["ph"] == "C"} <=
          {k + s for k in ("heap", "committed", "rss") for s in ("", second[4:])},
          "counter names: %r" % {e["name"] for e in ev if e["ph"] == "C"})
    got = {k: (max(v), v[-1]) for k, v in tracks.items()}
    # image 1 peaks at 6000 and holds 4000 at exec; image 2 at 10000; the child
    # at 2100; each track ends at 0 with its image.
    equal(got, {(pid, "heap"): (6000, 0), (pid, second): (10000, 0), (child, "heap"): (2100, 0)},
          "heap tracks")
    inst = [(e["pid"], e["name"], e["args"]["image"]) for e in ev if e["ph"] == "i"]
    equal(sorted(inst), sorted([(pid, "process start", 1), (pid, "process end", 1),
                                (pid, "process start", 2), (pid, "process end", 2),
                                (child, "process start", 1), (child, "process end", 1)]),
          "instants")
    # -pid keeps the pid's two images.
    ev = json.loads(env.ht("export", t, "--format", "perfetto", "-pid", str(pid), "-o", "-")[0])
    equal(sorted({e["name"] for e in ev["traceEvents"] if e["ph"] == "C" and
                  e["name"].startswith("heap")}), ["heap", second], "-pid tracks")
    # A trace without a footer learns its processes as it is read: the same
    # tracks from what is whole of a cut copy.
    data = open(t, "rb").read()
    cut = os.path.join(env.tmp, "cut.htr")
    open(cut, "wb").write(data[:len(data) * 9 // 10])
    out, err = env.ht("export", cut, "--format", "perfetto", "-o", "-")
    check("no footer" in err, "the cut trace is read as such: %r" % err)
    ev = json.loads(out)["traceEvents"]
    cut_tracks = {(e["pid"], e["name"]) for e in ev if e["ph"] == "C" and e["name"].startswith("heap")}
    check((pid, second) in cut_tracks and cut_tracks <= set(got), "cut trace's tracks: %r" % cut_tracks)


def sql(env, db, query):
    return env.run(["sqlite3", "-batch", "-separator", "|", db, query])[0].strip()


@case
def sqlite_window(env):
    """sqlite over a window and several processes: per pid, the rows are the
    blocks table heap counts for that window; over the whole trace the
    never-freed ones are info's leaks per image."""
    t, procs = exec_chain(env)
    pid, child = procs[0]["pid"], procs[1]["pid"]
    # From the child's start to the exec: image 1's frees and the child's life.
    w0, w1 = procs[1]["start_ns"], procs[2]["start_ns"]
    rng = ["-range", "%dns" % w0, "%dns" % w1]
    db = os.path.join(env.tmp, "w.db")
    env.ht("export", t, "--format", "sqlite", "-o", db, *rng)
    rows = sql(env, db, "SELECT pid, count(*), sum(size) FROM allocations GROUP BY pid ORDER BY pid")
    tab = env.json("table", "heap", t, *rng, "--group-by", "process")
    want = sorted((g["process"]["pid"], g["count"], g["size"]) for g in tab["groups"] if g["count"])
    equal(rows, "\n".join("%d|%d|%d" % w for w in want), "sqlite rows per pid = table heap's")
    equal(want, [(child, 3, 2100)], "the window holds the child's allocations only")
    a = env.json("analyze", t, "-images", *rng)["totals"]
    equal((a["alloc_count"], a["alloc_bytes"]), (3, 2100), "analyze totals for the window")
    # The whole trace: leaks per image are info's (image 1's at exec, the child's at _exit).
    db2 = os.path.join(env.tmp, "all.db")
    env.ht("export", t, "--format", "sqlite", "-o", db2)
    got = sql(env, db2, "SELECT process, count(*), sum(size) FROM allocations "
                        "WHERE free_ns IS NULL OR at_exit = 1 GROUP BY process ORDER BY process")
    equal(got, "\n".join("%d|%d|%d" % (i, p["leaked_count"], p["leaked_bytes"])
                         for i, p in enumerate(procs)), "sqlite leaks per image = info's")
    equal([(p["leaked_count"], p["leaked_bytes"]) for p in procs], [(4, 4000), (2, 1400), (2, 10000)],
          "exec_chain's leaks")


@case
def massif_processes(env):
    """massif over several processes: the peak snapshot is info's peak and its
    tree the blocks of the image live then; -range is refused, saying why."""
    t, procs = exec_chain(env)
    tot = env.json("info", t)["totals"]
    out, _ = env.ht("export", t, "--format", "massif", "-o", "-")
    snaps = re.findall(r"mem_heap_B=(\d+)\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=(\w+)", out)
    peaks = [int(b) for b, kind in snaps if kind == "peak"]
    equal((peaks, tot["peak_bytes"]), ([10000], 10000), "massif peak snapshot")
    check(max(int(b) for b, _ in snaps) == 10000, "no snapshot above the peak")
    check(re.search(r"n1: 10000 0x[0-9a-f]+: after_exec ", out), "massif tree: %r" % out[-800:])
    _, err = env.ht("export", t, "--format", "massif", "-range", "0", "1s", "-o", "-", want=2)
    check("drop -range" in err, "massif -range: %r" % err)


if __name__ == "__main__":
    sys.exit(case_main(CASES, Env, "ht-exportw-"))
