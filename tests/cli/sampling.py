"""sampling.py - end-to-end tests of sampling by bytes (--sample-rate,
docs/session-protocol.md "Sampling"): the estimates of a sampled trace
against the truth a program prints, that only sampled blocks' frees are
recorded, that mappings are all recorded still, the options' errors, and
sampling with record -p and start.

Usage: sampling.py --build BUILD_DIR --src SOURCE_DIR CASE (one ctest test
per case, tests/cli/CMakeLists.txt). Reuses e2e.py's Env and Trace."""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from e2e import Env, Trace, one_error_line  # noqa: E402
from htest import Cases, Failure, case_main, check, equal  # noqa: E402
from rel import Pulse, attached, wait_until  # noqa: E402

CASES = Cases()
case = CASES

RATE = 64 * 1024


def near(got, want, what, tol=0.10):
    """got within tol (a fraction) of want."""
    check(abs(got - want) <= tol * want,
          "%s: estimate %d is not within %d%% of the truth %d (%.1f%% off)" %
          (what, got, tol * 100, want, 100.0 * (got - want) / want))


def stacks(env, trace):
    """analyze --format json, every stack: (functions joined by '<', counts)."""
    rc, out, err = env.run([env.heaptrail, "analyze", "--format", "json", "-top", "1000", trace])
    equal(rc, 0, "analyze: exit (%s)" % err)
    return json.loads(out)


def sum_under(res, fn):
    """Counts of every stack that has fn on it, summed."""
    tot = dict(outstanding_bytes=0, outstanding_count=0, total_bytes=0, total_count=0)
    for it in res["items"]:
        if any(f.split("!")[-1].split(" ")[0] == fn for f in it["stack"]):
            for k in tot:
                tot[k] += it[k]
    return tot


@case
def sampling_estimates(env):
    """A program that holds 64 MiB in blocks of 1..4 KiB from one stack and
    1 MiB in one block from another, and churns 64 MiB more through malloc,
    realloc and free, recorded with a fixed seed at 64KiB (a stack of 1024
    times the rate: the estimate's standard error is 1/sqrt(1024), 3%, so
    10% is three of them; at 512KiB it is 9% and 10% would be luck): the
    estimates are within 10% of what it printed, the 1 MiB block is exact,
    the churn holds nothing at the end, and the samples are a small part of
    the calls. (Seed 1 is a 1-in-400 draw: its first thousand distances
    average 0.90 of the rate, and its estimate is 10.2% high.)"""
    tr = env.record([env.prog("sampled")], extra=("--sample-rate", "64KiB", "--sample-seed", "2"))
    truth = dict(l.split(": ") for l in tr.stdout.strip().splitlines())
    held, held_blocks, churn_bytes, churn_blocks = (
        int(truth[k]) for k in ("held bytes", "held blocks", "churn bytes", "churn blocks"))
    equal(tr.info.get("sample_rate"), RATE, "info: sample_rate")
    equal(tr.info.get("estimated"), True, "info: estimated")
    # Samples: each of the three parts holds or moves 64 MiB, so about 1024
    # samples each; the program made held_blocks + churn_blocks heap calls.
    allocs = tr.info["events"].get("alloc", 0) + tr.info["events"].get("realloc", 0)
    check(2000 < allocs < 6000, "raw samples: %d allocation events, want far below %d calls" %
          (allocs, held_blocks + churn_blocks))
    equal(tr.info["totals"].get("unknown_frees"), 0, "frees of blocks never sampled are not recorded")

    res = stacks(env, tr.path)
    equal(res.get("sample_rate"), RATE, "analyze: sample_rate")
    many = sum_under(res, "many_small")
    near(many["outstanding_bytes"], held, "many_small: live bytes")
    near(many["outstanding_count"], held_blocks, "many_small: live blocks")
    big = sum_under(res, "one_big")
    equal((big["outstanding_bytes"], big["outstanding_count"]), (1 << 20, 1), "one_big: exact (size >= rate)")
    churn = sum_under(res, "churn")
    equal((churn["outstanding_bytes"], churn["outstanding_count"]), (0, 0), "churn: every sampled block's free seen")
    near(churn["total_bytes"], churn_bytes, "churn: bytes allocated")
    near(churn["total_count"], churn_blocks, "churn: blocks allocated")

    # Every output says so.
    rc, out, err = env.run([env.heaptrail, "info", tr.path])
    check("--sample-rate 64KiB" in out and "estimates" in out, "info text names the rate: %r" % out[:800])
    rc, out, err = env.run([env.heaptrail, "analyze", tr.path])
    check(out.startswith("NOTE: sampled trace (--sample-rate 64KiB)"), "analyze text: %r" % out[:200])
    rc, out, err = env.run([env.heaptrail, "analyze", "--format", "csv", tr.path])
    lines = out.splitlines()
    check(lines[0].endswith(",sample_rate") and all(l.endswith(",%d" % RATE) for l in lines[1:]),
          "analyze csv ends each row with the rate: %r" % lines[:2])
    rc, out, err = env.run([env.heaptrail, "table", "heap", tr.path])
    check("Note: sampled trace (--sample-rate 64KiB)" in out.splitlines()[1], "table text: %r" % out[:300])
    rc, out, err = env.run([env.heaptrail, "table", "heap", "--format", "json", tr.path])
    equal(json.loads(out).get("sample_rate"), RATE, "table json: sample_rate")
    rc, out, err = env.run([env.heaptrail, "timeline", "--format", "json", tr.path])
    equal(json.loads(out).get("sample_rate"), RATE, "timeline json: sample_rate")
    rc, out, err = env.run([env.heaptrail, "check", tr.path])
    check("sampled trace (--sample-rate 64KiB)" in out + err, "check names the rate: %r" % (out + err))
    for fmt, word in (("massif", b"sampled every 65536 bytes"), ("perfetto", b'"sample_rate":65536'),
                      ("pprof", b"sampled every 65536 bytes")):
        dst = os.path.join(env.tmp, "x." + fmt)
        rc, out, err = env.run([env.heaptrail, "export", "--format", fmt, "-o", dst, tr.path])
        equal(rc, 0, "export %s: exit (%s)" % (fmt, err))
        data = open(dst, "rb").read()
        if fmt == "pprof":
            import gzip
            data = gzip.decompress(data)
        check(word in data, "export %s says the rate (%r)" % (fmt, word))
    dst = os.path.join(env.tmp, "x.folded")
    rc, out, err = env.run([env.heaptrail, "export", "--format", "collapsed", "-o", dst, tr.path])
    equal(rc, 0, "export collapsed: exit (%s)" % err)
    check("note: sampled trace (--sample-rate 64KiB)" in err, "export collapsed says it on stderr: %r" % err)

    # The report: its data names the rate, and its heap lifetimes carry the
    # blocks each stands for, adding up to analyze's estimate.
    page = os.path.join(env.tmp, "x.html")
    rc, out, err = env.run([env.heaptrail, "report", "-o", page, tr.path])
    equal(rc, 0, "report: exit (%s)" % err)
    html = open(page).read()
    start = html.index('<script id="heaptrail-data" type="application/json">')
    data = json.loads(html[html.index(">", start) + 1:html.index("</script>", start)])
    equal(data["trace"].get("sample_rate"), RATE, "report data: sample_rate")
    heap = data["heap"]
    counts = sum(c for c, p in zip(heap["exact"]["count"], heap["exact"]["piece"]) if not p)
    counts += sum(heap.get("binned", {}).get("count", []))
    equal(counts, res["totals"]["alloc_count"], "report: the heap lifetimes' counts add up to analyze's")

    # The same seed samples the same allocations.
    again = env.record([env.prog("sampled")], name="again", extra=("--sample-rate", "64KiB", "--sample-seed", "2"))
    for k in ("alloc", "realloc", "free"):
        equal(again.info["events"][k], tr.info["events"][k], "a second run with the same seed: %s samples" % k)
    # Bytes are the same; counts are whole numbers rounded with a draw from
    # each block's address and time, which differ from run to run.
    for k in ("alloc_bytes", "leaked_bytes"):
        equal(again.info["totals"][k], tr.info["totals"][k], "a second run with the same seed: " + k)


@case
def sampling_maps(env):
    """Mappings are not sampled: mmap_ops under --sample-rate has every
    mapping event a full trace of it has."""
    full = env.record([env.prog("mmap_ops")], name="full", extra=("--no-maps",))
    samp = env.record([env.prog("mmap_ops")], name="samp", extra=("--no-maps", "--sample-rate", "1MiB"))
    for t in ("mmap", "munmap", "mremap", "mprotect", "brk"):
        equal(samp.info["events"].get(t, 0), full.info["events"].get(t, 0), "%s events with sampling" % t)
    check(full.info["events"].get("mmap", 0) > 0, "mmap_ops maps memory")
    for k in ("count", "bytes", "peak_bytes"):
        equal(samp.info["commit"][k], full.info["commit"][k], "committed memory with sampling: " + k)


@case
def sampling_every_byte(env):
    """--sample-rate 1: every allocation of a byte or more is at least the
    rate, so sampled with weight 1, and every number the analysis makes
    equals the full trace's, through every hooked entry point: the malloc
    family (malloc_family) and jemalloc's, tcmalloc's and mimalloc's own
    APIs and operators (tests/preload/alloc). Blocks of 0 bytes are the
    exception: sampling by bytes never sees them (nor their frees), nor
    the frees of blocks the trace never saw allocated."""
    keys = ("alloc_bytes", "leaked_count", "leaked_bytes", "temporary_bytes")
    progs = [env.prog("malloc_family")] + [
        os.path.join(env.build, "tests", "preload", "progs", "alloc_" + t) for t in ("je", "tc", "mi")]
    for prog in progs:
        check(os.path.exists(prog), "%s was built (scripts/deps.sh test installs the allocators)" % prog)
        name = os.path.basename(prog)
        full = env.record([prog], name=name + "-full")
        one = env.record([prog], name=name + "-1", extra=("--sample-rate", "1"))
        equal(one.info.get("sample_rate"), 1, name + ": sample_rate")
        for k in keys:
            equal(one.info["totals"][k], full.info["totals"][k], "%s at rate 1: %s" % (name, k))
        zero = [e for e in full.events if e.get("type") in ("alloc", "realloc") and e.get("size") == 0
                and e.get("addr") and not e.get("failed")]
        equal(one.info["totals"]["alloc_calls"], full.info["totals"]["alloc_calls"] - len(zero),
              name + " at rate 1: alloc_calls (those of 0 bytes not seen)")
        equal(one.info["totals"]["unknown_frees"], 0, name + " at rate 1: no free of a block never sampled")
        check(full.info["totals"]["alloc_calls"] > 5, name + " allocates")


@case
def sampling_options(env):
    """--sample-rate takes the CLI's sizes and rejects the rest, with the rule."""
    h = env.heaptrail
    for bad in ("0", "-1", "abc", "12XB", "", "2TiB"):
        rc, out, err = env.run([h, "record", "--sample-rate", bad, "-o", "x.htr", "--", env.prog("sampled")])
        one_error_line(rc, err, "record --sample-rate %r" % bad, "invalid sample rate")
        check("512KiB" in err, "the message shows a valid rate: %r" % err)
        check(not os.path.exists(os.path.join(env.tmp, "x.htr")), "no trace after a bad rate")
    rc, out, err = env.run([h, "start", "bad-rate", "--sample-rate", "0"])
    one_error_line(rc, err, "start --sample-rate 0", "invalid sample rate")
    rc, out, err = env.run([h, "start", "bad-ifeo", "--sample-rate", "1MiB", "--ifeo"])
    one_error_line(rc, err, "start --sample-rate --ifeo", "--ifeo")
    rc, out, err = env.run([h, "record", "--sample-seed", "3", "--", env.prog("sampled")])
    one_error_line(rc, err, "--sample-seed alone", "--sample-rate")
    for cmd in ("record", "start"):
        rc, out, err = env.run([h, cmd, "--help"])
        check("--sample-rate SIZE" in out, "%s --help shows --sample-rate" % cmd)
    # Units: 1 (byte), 4k, 1MiB all parse; the trace keeps the bytes.
    for text, want in (("4k", 4096), ("1MiB", 1 << 20), ("100", 100)):
        tr = env.record([env.prog("malloc_family")], name="u" + text, extra=("--sample-rate", text))
        equal(tr.info.get("sample_rate"), want, "--sample-rate %s" % text)


def pulse_estimates(env, trace, pulses, what):
    """pulse makes 100 malloc(777)/free pairs per pulse: the estimates of a
    trace sampled at 1KiB are within 10%, and nothing is live at the end."""
    tr = Trace(env, trace)
    equal(tr.info.get("sample_rate"), 1024, what + ": sample_rate")
    near(tr.info["totals"]["alloc_calls"], 100 * pulses, what + ": allocation calls")
    near(tr.info["totals"]["alloc_bytes"], 77700 * pulses, what + ": bytes allocated")
    check(tr.info["events"].get("alloc", 0) < 100 * pulses, what + ": fewer samples than calls")
    res = stacks(env, trace)
    equal(res["totals"]["outstanding_bytes"], 0, what + ": every sampled block's free was seen")


@case
def sampling_attach(env):
    """record -p with --sample-rate: the attached recorder learns the rate
    from the session."""
    t = Pulse(env)
    try:
        t.pulse()
        out = os.path.join(env.tmp, "attach.htr")
        r = subprocess.Popen([env.heaptrail, "record", "-p", str(t.pid), "--sample-rate", "1KiB",
                              "--sample-seed", "5", "-o", out], stderr=subprocess.PIPE)
        attached(r)
        t.pulse(20)
        r.send_signal(signal.SIGINT)
        err = r.stderr.read().decode()
        equal(r.wait(60), 0, "record -p: exit (%s)" % err)
        pulse_estimates(env, out, 20, "record -p")
    finally:
        t.end()


@case
def sampling_start(env):
    """start --sample-rate: the session daemon samples the processes it joins."""
    h = env.heaptrail
    t = Pulse(env)
    name = "samp-%d" % os.getpid()
    try:
        out = os.path.join(env.tmp, "start.htr")
        rc, _, err = env.run([h, "start", name, "--pid", str(t.pid), "--sample-rate", "1KiB", "-o", out, "-q"])
        equal(rc, 0, "start: exit (%s)" % err)
        t.pulse(20)
        rc, _, err = env.run([h, "stop", name])
        equal(rc, 0, "stop: exit (%s)" % err)
        pulse_estimates(env, out, 20, "start")
    finally:
        env.run([h, "stop", name])
        t.end()


def main():
    return case_main(CASES, Env, "ht-sampling-")


if __name__ == "__main__":
    sys.exit(main())
