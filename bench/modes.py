"""modes.py - what each recording mode adds on alloc_loop (docs/modes.md,
docs/performance.md): native, full tracing and the cheaper modes run
interleaved, N times each; prints the median wall and CPU time (user +
system of heaptrail and the program, from wait4) of each, what each mode
adds to the native run and that as a fraction of what full tracing adds.
Usage: python3 bench/modes.py [--runs N] [--iterations N] [--modes snapshot,...]
Not run by ctest: it wants a quiet machine."""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import OUT, ROOT, die, prepare, timed  # noqa: E402

MODES = {
    "full": [],
    "snapshot": ["--snapshot"],
    "sample": ["--sample-rate", "512KiB"],
    "ring": ["--ring", "64M"],
}


def main():
    ap = argparse.ArgumentParser(description="added time of each recording mode on alloc_loop")
    ap.add_argument("--runs", type=int, default=5, help="runs of each (median; default 5)")
    ap.add_argument("--iterations", type=int, default=2000000, help="alloc_loop's pairs")
    ap.add_argument("--modes", default="snapshot", help="modes besides full (comma-separated): "
                    + ", ".join(m for m in MODES if m != "full"))
    ap.add_argument("--heaptrail", help="the heaptrail binary (default build/bin/heaptrail)")
    args = ap.parse_args()
    modes = ["full"] + [m for m in args.modes.split(",") if m and m != "full"]
    for m in modes:
        if m not in MODES:
            die("unknown mode '%s' (known: %s)" % (m, ", ".join(MODES)))
    heaptrail = args.heaptrail or os.path.join(ROOT, os.environ.get("HT_BUILD_DIR", "build"),
                                               "bin", "heaptrail")
    if not os.access(heaptrail, os.X_OK):
        die("'%s' not found; build first (scripts/build.sh)" % heaptrail)
    prepare()
    argv = [os.path.join(OUT, "alloc_loop"), str(args.iterations), "1"]
    load = os.getloadavg()[0]
    wall = {k: [] for k in ["native"] + modes}
    cpu = {k: [] for k in wall}
    with tempfile.TemporaryDirectory(prefix="ht-modes-") as tmp:
        os.environ["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
        trace = os.path.join(tmp, "run.htr")
        for i in range(args.runs):
            # Interleaved, so a slow phase of the machine hits every mode alike.
            wall["native"].append(timed(argv, {}, tmp, cpu["native"]))
            for m in modes:
                cmd = [heaptrail, "record", "-q", "--force", "-o", trace] + MODES[m] + ["--"]
                wall[m].append(timed(cmd + argv, {}, tmp, cpu[m]))
            print("modes: run %d of %d" % (i + 1, args.runs), file=sys.stderr, flush=True)
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in wall}
    print("alloc_loop %d 1, median of %d interleaved runs, load average %.1f at the start"
          % (args.iterations, args.runs, load))
    print("| run | wall | added wall | CPU | added CPU |")
    print("|---|---:|---:|---:|---:|")
    nw, nc = med["native"]
    fw, fc = med["full"][0] - nw, med["full"][1] - nc
    for k in wall:
        w, c = med[k]
        if k == "native":
            print("| native | %.3f s | - | %.3f s | - |" % (w, c))
            continue
        aw, ac = w - nw, c - nc
        rel = "" if k == "full" else " (%.2fx)" % (aw / fw if fw > 0 else float("nan"))
        relc = "" if k == "full" else " (%.2fx)" % (ac / fc if fc > 0 else float("nan"))
        print("| %s | %.3f s | %.3f s%s | %.3f s | %.3f s%s |" % (k, w, aw, rel, c, ac, relc))


if __name__ == "__main__":
    main()
