#!/usr/bin/env python3
"""Processes heaptrail attaches to, in each mode (issue 12).

Custom heaps (include/heaptrail/heap.h): tests/programs/heap_pulse declares one pool before the attach and
one after it, and each mode (full, --snapshot, --sample-rate, --ring), with
record -p and with start --pid, must see exactly each heap's blocks made while
attached, and nothing of a fork child (attach mode does not follow children).
After the stop the program's calls go to the dormant recorder (no trace sees
them), and a second attach sees exactly the pulses made under it.

Memory committed before the attach: found in /proc/PID/maps, committed
follows the anonymous RSS."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import Cases, Failure, case_main, check, equal  # noqa: E402

CASES = Cases()

MODES = {"full": [], "snapshot": ["--snapshot"], "sampled": ["--sample-rate", "1"],
         "ring": ["--ring", "4M"]}


class Env:
    def __init__(self, build, src, tmp):
        self.tmp = tmp
        self.ht = os.path.join(build, "bin", "heaptrail")
        self.prog = os.path.join(build, "tests", "programs", "heap_pulse")
        # Named sessions live in the directory of this test's own that ctest
        # gives it (XDG_RUNTIME_DIR, tests/CMakeLists.txt): tmp is on /tmp,
        # no tmpfs, where the sessions would go to /dev/shm/heaptrail-UID.
        self.env = dict(os.environ)

    def run(self, args, want=0):
        p = subprocess.run([self.ht] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           cwd=self.tmp, env=self.env, timeout=120)
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        if want is not None and p.returncode != want:
            raise Failure("heaptrail %s: exit %d, want %d:\n%s" % (" ".join(args), p.returncode, want, err))
        return out


class Target:
    """heap_pulse, driven a byte at a time; send() returns its ht_heap_traced()."""

    def __init__(self, env):
        self.p = subprocess.Popen([env.prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  cwd=env.tmp)
        self.pid = self.p.pid
        line = self.p.stdout.readline().decode().split()
        self.early, self.late = [int(x.split("=")[1]) for x in line]

    def send(self, cmds):
        got = []
        for c in cmds:
            self.p.stdin.write(c.encode())
            self.p.stdin.flush()
            line = self.p.stdout.readline().decode()
            check(line in ("ok 0\n", "ok 1\n"), "heap_pulse answered %r to %r" % (line, c))
            got.append(int(line[3]))
        return got

    def end(self):
        self.p.stdin.close()
        equal(self.p.wait(30), 0, "heap_pulse's exit status")


class Session:
    """record -p PID or start NAME --pid PID, in a mode, until stop()."""

    def __init__(self, env, t, how, mode, out):
        self.env, self.how, self.out = env, how, out
        self.name = "heaps-%d" % os.getpid()
        opts = MODES[mode] + ["-q", "-o", out, "--force"]
        if how == "start":
            env.run(["start", self.name, "--pid", str(t.pid)] + opts)
            return
        self.r = subprocess.Popen([env.ht, "record", "-p", str(t.pid)] + MODES[mode] + ["-o", out, "--force"],
                                  stderr=subprocess.PIPE, cwd=env.tmp, env=env.env)
        said = []
        for line in self.r.stderr:
            if line.startswith(b"heaptrail: tracing"):
                return
            said.append(line.decode(errors="replace").rstrip())
        raise Failure("record -p ended without attaching (exit %s): %s" % (self.r.wait(), " | ".join(said)))

    def stop(self):
        if self.how == "start":
            self.env.run(["stop", self.name])
            return
        self.r.send_signal(signal.SIGINT)
        err = self.r.stderr.read().decode()
        equal(self.r.wait(60), 0, "record -p's exit status (%s)" % err)


def heaps(env, trace, t):
    """analyze --summary: {heap: (allocations, bytes, live blocks, live bytes, name)}."""
    out = env.run(["analyze", "--summary", "--format", "json", trace])
    names = {t.early: "early", t.late: "late"}
    res = {}
    for it in json.loads(out)["items"]:
        check(it["pid"] == t.pid, "a row of another process: %r" % it)
        res[names.get(it["handle"], it["handle"])] = (it["total_count"], it["total_bytes"],
                                                      it["outstanding_count"],
                                                      it["outstanding_bytes"], it["heap_name"])
    return res


def attached(env, how, mode):
    t = Target(env)
    try:
        # Blocks of both pools before the attach: unknown to the traces.
        equal(t.send("ca"), [0, 0], "traced before the attach")
        first = os.path.join(env.tmp, "first.htr")
        s = Session(env, t, how, mode, first)
        try:
            equal(t.send("caaaf"), [1] * 5, "traced while attached")
        finally:
            s.stop()
        # The entries keep the dormant recorder (docs/attach.md, "Custom heaps").
        equal(t.send("a"), [1], "traced after the stop")
        second = os.path.join(env.tmp, "second.htr")
        s = Session(env, t, how, mode, second)
        try:
            equal(t.send("aa"), [1, 1], "traced while attached again")
        finally:
            s.stop()
        equal(t.send("a"), [1], "traced after the second stop")
    finally:
        t.end()
    # A pulse: 5 allocations of 100 and a realloc to 200 (3 live, 400 bytes)
    # in the late pool, 2 of 50 kept in the early pool. The early pool was
    # declared before the attach: it has no name in the trace.
    snap = mode == "snapshot"
    for trace, n, late_name in ((first, 3, "late pool"), (second, 2, None)):
        got = heaps(env, trace, t)
        late = (3 * n, 400 * n) if snap else (6 * n, 700 * n)
        early = (2 * n, 100 * n)
        want = {"late": late + (3 * n, 400 * n, late_name), "early": early + early + (None,)}
        equal(got, want, "%s, %s: by heap in %s" % (mode, how, os.path.basename(trace)))
        info = json.loads(env.run(["info", "--format", "json", trace]))
        equal([p["pid"] for p in info["processes"]], [t.pid], "processes (no fork child)")
        equal(info.get("events_lost"), 0, "events lost")


def add_cases():
    for mode in MODES:
        for how in ("record", "start"):
            def fn(env, how=how, mode=mode):
                attached(env, how, mode)
            CASES["heaps-%s-%s" % (how, mode)] = fn


add_cases()


def rss_anon(pid):
    with open("/proc/%d/status" % pid) as f:
        return [int(l.split()[1]) * 1024 for l in f if l.startswith("RssAnon:")][0]


@CASES
def commit_before(env):
    """8 MiB mapped with the raw system call and 4 MiB malloc'd (glibc's own
    mmap), touched, before record -p: committed at the end of the trace is
    within 10% of the process's anonymous RSS then, and the session's own
    mapping, replaced by a placeholder at the stop, is not among it."""
    t = Target(env)
    try:
        equal(t.send("m"), [0], "mapped before the attach")
        out = os.path.join(env.tmp, "c.htr")
        s = Session(env, t, "record", "full", out)
        try:
            equal(t.send("a"), [1], "a pulse while attached")
            rss = rss_anon(t.pid)
        finally:
            s.stop()
    finally:
        t.end()
    tl = json.loads(env.run(["timeline", out, "--series", "commit", "--format", "json"]))
    points = tl["series"][0]["points"]
    check(points, "committed points")
    last = points[-1][1]
    check(abs(last - rss) <= rss / 10, "committed %d within 10%% of RssAnon %d" % (last, rss))
    rows = json.loads(env.run(["table", "commit", out, "--group-by", "none", "--format", "json"]))["rows"]
    sizes = sorted(r["size"] for r in rows)
    check(sizes and sizes[-1] < 16 << 20, "no range larger than the program's: %r" % sizes)
    check(any(r["size"] >= 8 << 20 and r["unseen"] for r in rows), "the raw 8 MiB found: %r" % rows)


@CASES
def starting(env):
    """record -p of a process whose dynamic loader has not mapped its libc
    yet (a program spawned a moment before, on a loaded machine: 'no dlopen
    in the process'): the attach waits for its libc, and the program's
    allocations are traced. Here it is held stopped at its exec for 0.3 s."""
    libc = ctypes.CDLL(None, use_errno=True)
    t = Target.__new__(Target)
    # PTRACE_TRACEME: the child stops at its exec, before the loader runs.
    t.p = subprocess.Popen([env.prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=env.tmp,
                           preexec_fn=lambda: libc.ptrace(0, 0, None, None))
    t.pid = t.p.pid
    timer = None
    try:
        _, st = os.waitpid(t.pid, os.WUNTRACED)
        check(os.WIFSTOPPED(st), "stopped at the exec: status %#x" % st)
        equal(libc.ptrace(17, t.pid, None, signal.SIGSTOP), 0, "PTRACE_DETACH, left stopped")
        with open("/proc/%d/maps" % t.pid) as f:
            maps = f.read()
        check("/ld-linux" in maps and "/libc.so" not in maps, "only the loader mapped:\n" + maps)
        timer = threading.Timer(0.3, os.kill, (t.pid, signal.SIGCONT))
        timer.start()
        out = os.path.join(env.tmp, "s.htr")
        s = Session(env, t, "record", "full", out)
        try:
            line = t.p.stdout.readline().decode().split()
            t.early, t.late = [int(x.split("=")[1]) for x in line]
            equal(t.send("ca"), [1, 1], "traced once attached")
        finally:
            s.stop()
    finally:
        if timer:
            timer.join()
        t.end()
    got = {k: v[:4] for k, v in heaps(env, out, t).items()}
    equal(got, {"late": (6, 700, 3, 400), "early": (2, 100, 2, 100)}, "by heap")


if __name__ == "__main__":
    sys.exit(case_main(CASES, Env, "ht-attach-"))
