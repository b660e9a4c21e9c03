"""bench.py - the benchmark driver behind bench/run.sh: runs each workload
natively, under `heaptrail record` and under `heaptrack`, interleaved in the
same run, takes the median wall time of N runs, the added-time ratio, the
trace sizes, and the time and peak memory of analysing each workload's traces
(`heaptrail analyze -stacks` against `heaptrack_print -f`); prints the table
and rewrites the marked section of docs/performance.md. Never run by ctest:
it takes minutes and wants a quiet machine."""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
OUT = os.path.join(BENCH, "out")
DOC = os.path.join(ROOT, "docs", "performance.md")
BEGIN = "<!-- bench:begin (bench/run.sh rewrites this section) -->"
END = "<!-- bench:end -->"

ALLOC_ITERATIONS = 2000000
THREAD_ITERATIONS = 250000
DEEP_ITERATIONS = 300000
PY_ROUNDS = 2
JQ_MB = 25
JQ_FILTER = "[.[] | select(.score > 500) | {id, name, n: (.tags | length)}] | length"


def die(msg):
    print("bench: error: " + msg, file=sys.stderr)
    sys.exit(2)


def real_binary(name):
    """The ELF file behind a command: a version manager's shim (pyenv) is a
    shell script that starts dozens of processes before the interpreter, which
    a tracer would follow and the program never pays natively."""
    path = shutil.which(name) or name
    if "/shims/" in path and shutil.which("pyenv"):
        p = subprocess.run(["pyenv", "which", name], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
        if p.returncode == 0 and p.stdout.strip():
            path = p.stdout.decode().strip()
    if "/shims/" in path and os.access("/usr/bin/" + name, os.X_OK):
        path = "/usr/bin/" + name
    return os.path.realpath(path)


def clangxx():
    for name in ("clang++", "clang++-14"):
        if shutil.which(name):
            return real_binary(name)
    return None


def workloads(jq_input):
    """Each workload: name, argv, extra environment."""
    loop = os.path.join(OUT, "alloc_loop")
    rows = [
        ("alloc_loop, 1 thread", [loop, str(ALLOC_ITERATIONS), "1"], {}),
        ("alloc_loop, 8 threads x %dk" % (THREAD_ITERATIONS // 1000),
         [loop, str(THREAD_ITERATIONS), "8"], {}),
        ("deep stacks (20-40 frames)", [os.path.join(OUT, "deep_stacks"), str(DEEP_ITERATIONS)],
         {}),
    ]
    cxx = clangxx()
    if cxx:
        rows.append(("clang++ -fsyntax-only (regex, map, iostream)",
                     [cxx, "-fsyntax-only", os.path.join(BENCH, "cxx_input.cpp")], {}))
    rows += [
        ("python3 json (PYTHONMALLOC=malloc)",
         [real_binary("python3"), os.path.join(BENCH, "pyjson.py"), str(PY_ROUNDS)],
         {"PYTHONMALLOC": "malloc"}),
        ("jq over %d MB" % JQ_MB, ["jq", JQ_FILTER, jq_input], {}),
    ]
    return rows


def prepare():
    os.makedirs(OUT, exist_ok=True)
    loop = os.path.join(OUT, "alloc_loop")
    src = os.path.join(BENCH, "alloc_loop.c")
    if not os.path.exists(loop) or os.path.getmtime(loop) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-g", "-pthread", "-o", loop, src], check=True)
    deep = os.path.join(OUT, "deep_stacks")
    src = os.path.join(BENCH, "deep_stacks.c")
    if not os.path.exists(deep) or os.path.getmtime(deep) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-g", "-o", deep, src], check=True)
    data = os.path.join(OUT, "data-%dmb.json" % JQ_MB)
    if not os.path.exists(data):
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_json.py"), data, str(JQ_MB)],
                       check=True)
    return data


def timed_rss(argv, env_extra, cwd, cpu=None):
    """Wall time and peak RSS (bytes) of one run of argv; appends to cpu the
    CPU time (user + system) of the process and the descendants it waited
    for, which other load on the machine barely changes."""
    env = dict(os.environ)
    env.update(env_extra)
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.monotonic() - t0
        if cpu is not None:
            cpu.append(usage.ru_utime + usage.ru_stime)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise RuntimeError("%s exited %d: %s" % (" ".join(argv[:4]), p.returncode,
                                                       err.read().decode(errors="replace")[-400:]))
    return dt, usage.ru_maxrss * 1024


def timed(argv, env_extra, cwd, cpu=None):
    return timed_rss(argv, env_extra, cwd, cpu)[0]


def file_size(path):
    return os.path.getsize(path) if path and os.path.exists(path) else 0


def heaptrack_file(prefix):
    for ext in (".zst", ".gz", ""):
        if os.path.exists(prefix + ext):
            return prefix + ext
    return None


def measure(name, argv, env, runs, heaptrail, tmp):
    """Median wall times of native, heaptrail and heaptrack; sizes of the last traces."""
    row = {"name": name, "native": [], "heaptrail": [], "heaptrack": [],
           "ht_trace": None, "hk_trace": None, "error": None, "hk_error": None,
           "cpu": {"native": [], "heaptrail": [], "heaptrack": []}}
    def run_native(i):
        row["native"].append(timed(argv, env, tmp, row["cpu"]["native"]))

    def run_heaptrail(i):
        if not heaptrail or row["error"]:
            return
        trace = os.path.join(tmp, "run.htr")
        if os.path.exists(trace):
            os.unlink(trace)
        try:
            row["heaptrail"].append(timed([heaptrail, "record", "-o", trace, "--"] + argv,
                                          env, tmp, row["cpu"]["heaptrail"]))
            row["ht_trace"] = trace
        except RuntimeError as e:
            row["error"] = str(e)

    def run_heaptrack(i):
        prefix = os.path.join(tmp, "hk%d" % i)
        try:
            row["heaptrack"].append(timed(["heaptrack", "-o", prefix] + argv, env, tmp,
                                          row["cpu"]["heaptrack"]))
        except RuntimeError as e:
            # heaptrack's own failure is a result too: say it, keep going.
            row["hk_error"] = str(e)
            print("bench: heaptrack failed: %s" % e, file=sys.stderr)
        last = heaptrack_file(prefix)
        if row["hk_trace"] and row["hk_trace"] != last and os.path.exists(row["hk_trace"]):
            os.unlink(row["hk_trace"])
        row["hk_trace"] = last

    order = [run_native, run_heaptrail, run_heaptrack]
    for i in range(runs):
        # Interleaved so a slow phase of the machine hits every tool alike,
        # and the order turns by one each run so that no tool always runs
        # right after another (jq ran 0.13 s slower under the same recorder
        # right after its native run than second after it: "The method").
        for k in range(len(order)):
            order[(i + k) % len(order)](i)
    for k in ("native", "heaptrail", "heaptrack"):
        row[k] = statistics.median(row[k]) if row[k] else None
        row["cpu"][k] = statistics.median(row["cpu"][k]) if row["cpu"][k] else None
    row["ht_size"] = file_size(row["ht_trace"])
    row["hk_size"] = file_size(row["hk_trace"])
    return row


def analysis_row(heaptrail, row, runs, tmp):
    """heaptrail analyze -stacks vs heaptrack_print -f on the traces of one
    workload: median times and peak RSS, interleaved."""
    if not heaptrail or not row["ht_trace"] or not row["hk_trace"]:
        return None
    probe = subprocess.run([heaptrail, "analyze", "--help"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        return None
    ht, hk, ht_rss, hk_rss = [], [], [], []
    for i in range(runs):
        # each tool first on every other run, as in measure()
        for k in range(2):
            if (i + k) % 2 == 0:
                t, m = timed_rss([heaptrail, "analyze", row["ht_trace"], "-stacks"], {}, tmp)
                ht.append(t)
                ht_rss.append(m)
            else:
                t, m = timed_rss(["heaptrack_print", "-f", row["hk_trace"]], {}, tmp)
                hk.append(t)
                hk_rss.append(m)
    return {"heaptrail": statistics.median(ht), "heaptrack": statistics.median(hk),
            "ht_rss": max(ht_rss), "hk_rss": max(hk_rss)}


def human(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def fmt_s(x):
    return "%.3f s" % x if x is not None else "-"


def ratio(a, b):
    return "%.2fx" % (a / b) if a and b else "-"


def added(r):
    """heaptrail's added time over heaptrack's: the issue's main measure."""
    if r["heaptrail"] is None or r["heaptrack"] is None or r["native"] is None:
        return "-"
    a, b = r["heaptrail"] - r["native"], r["heaptrack"] - r["native"]
    return "%.2fx" % (a / b) if b > 0 else "-"


def added_cpu(r):
    """The same in CPU time (program, collector, every process of the tool)."""
    c = r["cpu"]
    if c["heaptrail"] is None or c["heaptrack"] is None or c["native"] is None:
        return "-"
    a, b = c["heaptrail"] - c["native"], c["heaptrack"] - c["native"]
    return "%.2fx (%.2f / %.2f s)" % (a / b, a, b) if b > 0 else "-"


def table(rows):
    lines = ["| workload | native | heaptrail | heaptrack | added time, heaptrail / heaptrack "
             "| added CPU time, heaptrail / heaptrack "
             "| heaptrail trace | heaptrack trace | size ratio "
             "| analyze -stacks | heaptrack_print -f | time ratio | peak RSS, heaptrail / heaptrack |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        a = r.get("analysis")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], fmt_s(r["native"]), fmt_s(r["heaptrail"]), fmt_s(r["heaptrack"]),
            added(r), added_cpu(r),
            human(r["ht_size"]) if r["ht_size"] else "-",
            human(r["hk_size"]) if r["hk_size"] else "-",
            ratio(r["ht_size"], r["hk_size"]),
            fmt_s(a["heaptrail"]) if a else "-", fmt_s(a["heaptrack"]) if a else "-",
            ratio(a["heaptrail"], a["heaptrack"]) if a else "-",
            "%s / %s" % (human(a["ht_rss"]), human(a["hk_rss"])) if a else "-"))
    return lines


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    hk = subprocess.run(["heaptrack", "--version"], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT).stdout.decode().strip().splitlines()
    # The load says how much the other users of a shared machine disturbed the run.
    load = "load average %.1f at the end" % os.getloadavg()[0]
    return "%s, %d cores, Linux %s, %s, %s" % (cpu, os.cpu_count() or 0, platform.release(),
                                               hk[0] if hk else "heaptrack ?", load)


def rewrite_doc(section):
    try:
        with open(DOC) as f:
            text = f.read()
    except FileNotFoundError:
        text = "# Performance\n\n%s\n%s\n" % (BEGIN, END)
    if BEGIN not in text or END not in text:
        text = text.rstrip("\n") + "\n\n%s\n%s\n" % (BEGIN, END)
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(DOC, "w") as f:
        f.write(head + BEGIN + "\n" + section + "\n" + END + tail)


def main():
    ap = argparse.ArgumentParser(description="heaptrail vs native vs heaptrack")
    ap.add_argument("--quick", action="store_true", help="3 runs per measurement instead of 5")
    ap.add_argument("--runs", type=int, help="runs per measurement (median)")
    ap.add_argument("--heaptrail", help="the heaptrail binary (default build/bin/heaptrail)")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    ap.add_argument("--only", help="run only the workloads whose name contains one of these (comma-separated)")
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    load_start = os.getloadavg()[0]

    for tool in ("heaptrack", "heaptrack_print", "jq", "cc"):
        if not shutil.which(tool):
            die("'%s' not found; run scripts/deps.sh bench" % tool)
    heaptrail = args.heaptrail or os.path.join(ROOT, os.environ.get("HT_BUILD_DIR", "build"),
                                               "bin", "heaptrail")
    if not os.access(heaptrail, os.X_OK):
        die("'%s' not found; build first (scripts/build.sh)" % heaptrail)

    data = prepare()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ht-bench-") as tmp:
        # heaptrail's symbol cache (docs/symbol-cache.md) lives in the run's
        # temporary directory: warm after a workload's first recording, as
        # for a user recording the same program again, and gone afterwards.
        os.environ["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
        for name, argv, env in workloads(data):
            if args.only and not any(o in name for o in args.only.split(",")):
                continue
            print("bench: %s ..." % name, file=sys.stderr, flush=True)
            r = measure(name, argv, env, runs, heaptrail, tmp)
            if r["error"]:
                print("bench: heaptrail failed on %s: %s" % (name, r["error"]), file=sys.stderr)
            r["analysis"] = analysis_row(heaptrail, r, runs, tmp)
            rows.append(r)
            print("\n".join(table([r])[2:]), file=sys.stderr, flush=True)
            for key in ("ht_trace", "hk_trace"):
                if r[key] and os.path.exists(r[key]):
                    os.unlink(r[key])

    lines = table(rows)
    analysis = [r for r in rows if r.get("analysis")]
    errors = ["- heaptrail failed on %s: `%s`" % (r["name"], r["error"].strip().splitlines()[-1]
                                                  if r["error"].strip() else "?")
              for r in rows if r["error"]]
    errors += ["- heaptrack failed on %s (in some runs): `%s`" %
               (r["name"], r["hk_error"].strip().splitlines()[-1])
               for r in rows if r.get("hk_error")]
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = "\n".join(
        ["Measured %s with `bench/run.sh%s` (median of %d interleaved runs) on: %s "
         "(load average %.1f at the start)." %
         (stamp, " --quick" if args.quick else "", runs, machine(), load_start), ""] + lines +
        ([""] + errors if errors else []) +
        ([""] + ["No analysis row: `heaptrail analyze` is not available in this build."]
         if not analysis else []))
    print("\n".join(lines))
    for e in errors:
        print(e)
    if not args.no_doc and not args.only:
        rewrite_doc(section)
        print("bench: wrote %s" % os.path.relpath(DOC, ROOT), file=sys.stderr)


if __name__ == "__main__":
    main()
