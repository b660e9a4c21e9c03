"""clock.py - end-to-end tests of the recorder's clock (docs/session-protocol.md,
"The clock"): TSC ticks converted by the collector, or CLOCK_MONOTONIC when
forced. tests/programs/clock_stamps makes allocations whose sizes say their
order: every thread's in order, a parent's and its child's in the order a
pipe handshake imposed, and allocations whose CLOCK_MONOTONIC the program
read itself (side file) a moment after each. Recorded by record, record
--clock monotonic, HEAPTRAIL_CLOCK=monotonic, record -p and start.

Usage: clock.py --build BUILD_DIR --src SOURCE_DIR CASE (one ctest test
per case, tests/cli/CMakeLists.txt)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from e2e import Env, Trace, one_error_line  # noqa: E402
from htest import Cases, Failure, case_main, check, equal  # noqa: E402
from rel import attached  # noqa: E402

CASES = Cases()
case = CASES

THREADS, PER_THREAD, ROUNDS, WINDOWS, PER_WINDOW = 4, 2000, 50, 20, 20
# The program reads its clock a moment after the recorder stamped the
# allocation; the smallest such distance of each 50 ms window must agree
# with the others' within this (the collector's merge watermark is 1 ms).
AGREE_NS = 100000


def tsc_invariant():
    """What the session should choose by itself on this machine."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return {"constant_tsc", "nonstop_tsc", "rdtscp"} <= flags
    return False


def check_trace(env, path, stamps, what, children=True):
    """The three orders and the agreement with the program's own clock.
    An attached process's fork child is not traced (docs/attach.md): then
    only the parent's half of the handshake is there, in order."""
    tr = Trace(env, path)
    equal(tr.info.get("events_lost"), 0, what + ": events lost")
    evs = tr.events
    ts = [e["ts"] for e in evs]
    check(all(a <= b for a, b in zip(ts, ts[1:])), what + ": the trace is in time order")
    allocs = [e for e in evs if e["type"] == "alloc"]
    # Each thread's allocations in its own order, times never going back.
    for k in range(THREADS):
        lo = 10000 * (k + 1)
        mine = [e for e in allocs if lo <= e["size"] < lo + PER_THREAD]
        equal([e["size"] for e in mine], list(range(lo, lo + PER_THREAD)),
              "%s: thread %d's allocations in program order" % (what, k))
        equal(len({e["tid"] for e in mine}), 1, "%s: thread %d is one thread" % (what, k))
    # Parent and child in the order their pipe handshake imposed.
    pp = [e for e in allocs if 3000 <= e["size"] < 3000 + 2 * ROUNDS]
    equal([e["size"] for e in pp], list(range(3000, 3000 + 2 * ROUNDS, 1 if children else 2)),
          what + ": parent and child allocations in handshake order")
    equal(len({e["pid"] for e in pp}), 2 if children else 1, what + ": processes that took turns")
    # The program's own CLOCK_MONOTONIC, read just after each allocation.
    at = {e["size"] - 100000: e["ts"] for e in allocs if 100000 <= e["size"] < 100000 + WINDOWS * PER_WINDOW}
    equal(len(at), WINDOWS * PER_WINDOW, what + ": stamped allocations in the trace")
    mono = {}
    with open(stamps) as f:
        for line in f:
            n, ns = line.split()
            mono[int(n)] = int(ns)
    equal(len(mono), WINDOWS * PER_WINDOW, what + ": stamps in the side file")
    # mono - ts is the trace's origin plus how long after the stamp the
    # program read its clock (never less): the smallest of each window
    # shows the origin, which must not move over the second of the run.
    mins = [min(mono[n] - at[n] for n in range(w * PER_WINDOW, (w + 1) * PER_WINDOW)) for w in range(WINDOWS)]
    spread = max(mins) - min(mins)
    check(spread <= AGREE_NS,
          "%s: the trace's times drift from CLOCK_MONOTONIC by %d ns over %d ms (at most %d): %r" %
          (what, spread, (mono[len(mono) - 1] - mono[0]) // 1000000, AGREE_NS, mins))
    # From the first window's stamp to the last's, each the one the program
    # read soonest after: a program preempted between the recorder's stamp
    # and its own read of the very first or last allocation (160 us once,
    # at load 20) is not the trace's time going wrong.
    first = min(range(PER_WINDOW), key=lambda n: mono[n] - at[n])
    last = min(range((WINDOWS - 1) * PER_WINDOW, WINDOWS * PER_WINDOW), key=lambda n: mono[n] - at[n])
    span_trace = at[last] - at[first]
    span_mono = mono[last] - mono[first]
    check(abs(span_trace - span_mono) <= AGREE_NS,
          "%s: first to last stamp %d ns in the trace, %d ns by the program" % (what, span_trace, span_mono))
    return tr


def clock_said(err, want, what):
    check("clock: %s" % want in err, "%s: --stats says clock: %s (%r)" % (what, want, err[-400:]))


def record_case(env, extra=(), env_vars=None, want="tsc", name="x"):
    stamps = os.path.join(env.tmp, name + ".txt")
    path = os.path.join(env.tmp, name + ".htr")
    rc, out, err = env.run([env.heaptrail, "record", "--stats", "--time-resolution", "1ns", "-o", path] +
                           list(extra) + ["--", env.prog("clock_stamps"), stamps], env=env_vars)
    equal(rc, 0, "record: exit (%s)" % err)
    clock_said(err, want, "record")
    check_trace(env, path, stamps, "record %s" % " ".join(extra))
    return err


@case
def clock_record(env):
    """The default: the TSC where it is invariant, its error printed."""
    want = "tsc" if tsc_invariant() else "monotonic"
    err = record_case(env, want=want)
    if want == "tsc":
        line = [l for l in err.splitlines() if "clock: tsc" in l][0]
        apart = int(line.split("at most ")[1].split(" ns")[0])
        check(apart <= AGREE_NS, "the calibration's largest error %d ns is at most %d" % (apart, AGREE_NS))


@case
def clock_monotonic(env):
    """--clock monotonic and HEAPTRAIL_CLOCK=monotonic: the vDSO clock, the
    same orders and agreement; snapshot mode's sessions too."""
    record_case(env, extra=("--clock", "monotonic"), want="monotonic")
    record_case(env, env_vars={"HEAPTRAIL_CLOCK": "monotonic"}, want="monotonic", name="env")
    # Snapshot mode stamps no allocation: no TSC, no calibration at the start.
    rc, out, err = env.run([env.heaptrail, "record", "--snapshot", "--stats", "-o",
                            os.path.join(env.tmp, "snap.htr"), "--", "true"])
    equal(rc, 0, "record --snapshot: exit (%s)" % err)
    clock_said(err, "monotonic", "record --snapshot")


@case
def clock_options(env):
    """A clock that is not one says which ones there are."""
    rc, out, err = env.run([env.heaptrail, "record", "--clock", "hpet", "--", "true"])
    one_error_line(rc, err, "record --clock hpet", "auto or monotonic")


def waiting_program(env, stamps):
    return subprocess.Popen([env.prog("clock_stamps"), "-w", stamps], stdin=subprocess.PIPE)


@case
def clock_attach(env):
    """record -p: the attached recorder stamps with the session's clock."""
    stamps = os.path.join(env.tmp, "stamps.txt")
    path = os.path.join(env.tmp, "attach.htr")
    p = waiting_program(env, stamps)
    try:
        r = subprocess.Popen([env.heaptrail, "record", "--stats", "--time-resolution", "1ns", "-p", str(p.pid),
                              "-o", path], stderr=subprocess.PIPE)
        attached(r)
        p.stdin.write(b"g")
        p.stdin.close()
        equal(p.wait(120), 0, "the program's exit status")
        err = r.stderr.read().decode()
        equal(r.wait(60), 0, "record -p: exit (%s)" % err)
        clock_said(err, "tsc" if tsc_invariant() else "monotonic", "record -p")
        check_trace(env, path, stamps, "record -p", children=False)
    finally:
        p.kill()
        p.wait()


@case
def clock_start(env):
    """start --pid: the daemon's session converts the same way."""
    h = env.heaptrail
    stamps = os.path.join(env.tmp, "stamps.txt")
    path = os.path.join(env.tmp, "start.htr")
    name = "clock-%d" % os.getpid()
    p = waiting_program(env, stamps)
    try:
        rc, _, err = env.run([h, "start", name, "--pid", str(p.pid), "-o", path, "-q"])
        equal(rc, 0, "start: exit (%s)" % err)
        p.stdin.write(b"g")
        p.stdin.close()
        equal(p.wait(120), 0, "the program's exit status")
        rc, _, err = env.run([h, "stop", name])
        equal(rc, 0, "stop: exit (%s)" % err)
        check_trace(env, path, stamps, "start", children=False)
    finally:
        env.run([h, "stop", name])
        p.kill()
        p.wait()


def main():
    return case_main(CASES, Env, "ht-clock-")


if __name__ == "__main__":
    sys.exit(main())
