"""bench.py - the benchmark driver behind bench/run.sh: runs each workload
natively, under `heaptrail record` and under `heaptrack` in the same run,
takes the median wall time of N runs, the trace sizes, and the time to
analyse the traces; prints the table and rewrites the marked section of
docs/performance.md. Never run by ctest: it takes minutes and needs a quiet
machine."""
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
PY_ROUNDS = 2
JQ_MB = 25
JQ_FILTER = "[.[] | select(.score > 500) | {id, name, n: (.tags | length)}] | length"


def die(msg):
    print("bench: error: " + msg, file=sys.stderr)
    sys.exit(2)


def python3():
    """Debian's python3 (a real ELF file, not a version manager's shell shim)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def workloads(jq_input):
    """Each workload: name, argv, extra environment."""
    loop = os.path.join(OUT, "alloc_loop")
    return [
        ("alloc_loop, 1 thread", [loop, str(ALLOC_ITERATIONS), "1"], {}),
        ("alloc_loop, 2 threads", [loop, str(ALLOC_ITERATIONS), "2"], {}),
        ("python3 json (PYTHONMALLOC=malloc)",
         [python3(), os.path.join(BENCH, "pyjson.py"), str(PY_ROUNDS)],
         {"PYTHONMALLOC": "malloc"}),
        ("jq over %d MB" % JQ_MB, ["jq", JQ_FILTER, jq_input], {}),
    ]


def prepare():
    os.makedirs(OUT, exist_ok=True)
    loop = os.path.join(OUT, "alloc_loop")
    src = os.path.join(BENCH, "alloc_loop.c")
    if not os.path.exists(loop) or os.path.getmtime(loop) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-g", "-pthread", "-o", loop, src], check=True)
    data = os.path.join(OUT, "data-%dmb.json" % JQ_MB)
    if not os.path.exists(data):
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_json.py"), data, str(JQ_MB)],
                       check=True)
    return data


def timed(argv, env_extra, cwd):
    env = dict(os.environ)
    env.update(env_extra)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv[:4]), p.returncode,
                                                   p.stderr.decode(errors="replace")[-400:]))
    return dt


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
           "ht_trace": None, "hk_trace": None, "error": None}
    for i in range(runs):
        # Interleaved so a slow phase of the machine hits every tool alike.
        row["native"].append(timed(argv, env, tmp))
        if heaptrail and not row["error"]:
            trace = os.path.join(tmp, "run.htr")
            if os.path.exists(trace):
                os.unlink(trace)
            try:
                row["heaptrail"].append(timed([heaptrail, "record", "-o", trace, "--"] + argv,
                                              env, tmp))
                row["ht_trace"] = trace
            except RuntimeError as e:
                row["error"] = str(e)
        prefix = os.path.join(tmp, "hk%d" % i)
        row["heaptrack"].append(timed(["heaptrack", "-o", prefix] + argv, env, tmp))
        last = heaptrack_file(prefix)
        if row["hk_trace"] and row["hk_trace"] != last and os.path.exists(row["hk_trace"]):
            os.unlink(row["hk_trace"])
        row["hk_trace"] = last
    for k in ("native", "heaptrail", "heaptrack"):
        row[k] = statistics.median(row[k]) if row[k] else None
    row["ht_size"] = file_size(row["ht_trace"])
    row["hk_size"] = file_size(row["hk_trace"])
    return row


def analysis_row(heaptrail, row, runs, tmp):
    """heaptrail analyze -stacks vs heaptrack_print on the traces of one workload."""
    if not heaptrail or not row["ht_trace"] or not row["hk_trace"]:
        return None
    probe = subprocess.run([heaptrail, "analyze", "--help"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        return None
    ht, hk = [], []
    for _ in range(runs):
        ht.append(timed([heaptrail, "analyze", row["ht_trace"], "-stacks"], {}, tmp))
        hk.append(timed(["heaptrack_print", "-f", row["hk_trace"]], {}, tmp))
    return {"name": "analysis of the %s traces" % row["name"],
            "heaptrail": statistics.median(ht), "heaptrack": statistics.median(hk)}


def human(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def fmt_s(x):
    return "%.3f s" % x if x is not None else "-"


def ratio(a, b):
    return "%.2fx" % (a / b) if a and b else "-"


def table(rows, analysis):
    lines = ["| workload | native | heaptrail | heaptrack | heaptrail / native | "
             "heaptrack / native | heaptrail / heaptrack | heaptrail trace | heaptrack trace |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], fmt_s(r["native"]), fmt_s(r["heaptrail"]), fmt_s(r["heaptrack"]),
            ratio(r["heaptrail"], r["native"]), ratio(r["heaptrack"], r["native"]),
            ratio(r["heaptrail"], r["heaptrack"]),
            human(r["ht_size"]) if r["ht_size"] else "-",
            human(r["hk_size"]) if r["hk_size"] else "-"))
    for a in analysis:
        lines.append("| %s | - | %s | %s | - | - | %s | - | - |" % (
            a["name"], fmt_s(a["heaptrail"]), fmt_s(a["heaptrack"]),
            ratio(a["heaptrail"], a["heaptrack"])))
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
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 5)

    for tool in ("heaptrack", "heaptrack_print", "jq", "cc"):
        if not shutil.which(tool):
            die("'%s' not found; run scripts/deps.sh bench" % tool)
    heaptrail = args.heaptrail or os.path.join(ROOT, os.environ.get("HT_BUILD_DIR", "build"),
                                               "bin", "heaptrail")
    if not os.access(heaptrail, os.X_OK):
        die("'%s' not found; build first (scripts/build.sh)" % heaptrail)

    data = prepare()
    rows, analysis = [], []
    with tempfile.TemporaryDirectory(prefix="ht-bench-") as tmp:
        for name, argv, env in workloads(data):
            print("bench: %s ..." % name, file=sys.stderr, flush=True)
            r = measure(name, argv, env, runs, heaptrail, tmp)
            if r["error"]:
                print("bench: heaptrail failed on %s: %s" % (name, r["error"]), file=sys.stderr)
            rows.append(r)
            if name.startswith("alloc_loop, 1"):
                a = analysis_row(heaptrail, r, runs, tmp)
                if a:
                    analysis.append(a)
            for key in ("ht_trace", "hk_trace"):
                if r[key] and os.path.exists(r[key]):
                    os.unlink(r[key])

    lines = table(rows, analysis)
    errors = ["- heaptrail failed on %s: `%s`" % (r["name"], r["error"].strip().splitlines()[-1]
                                                  if r["error"].strip() else "?")
              for r in rows if r["error"]]
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = "\n".join(
        ["Measured %s with `bench/run.sh%s` (median of %d runs) on: %s." %
         (stamp, " --quick" if args.quick else "", runs, machine()), ""] + lines +
        ([""] + errors if errors else []) +
        ([""] + ["No analysis row: `heaptrail analyze` is not available in this build."]
         if not analysis else []))
    print("\n".join(lines))
    for e in errors:
        print(e)
    if not args.no_doc:
        rewrite_doc(section)
        print("bench: wrote %s" % os.path.relpath(DOC, ROOT), file=sys.stderr)


if __name__ == "__main__":
    main()
