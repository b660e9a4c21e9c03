"""sessions.py - end-to-end tests of named sessions and of IFEO and the
AutoLogger: `heaptrail start/update/stop/sessions`, the control API test
program, examples/suspended, `heaptrail ifeo` and `heaptrail autologger`
(inside a private mount namespace with an overlay on /etc), on real
processes, asserting on the traces' contents.

Usage: sessions.py --build BUILD_DIR --src SOURCE_DIR CASE
Each CASE is one ctest test (tests/sessions/CMakeLists.txt). Everything runs
with XDG_RUNTIME_DIR set to a fresh private directory on /dev/shm, so the
sessions found are only the test's own; every session, process and file the
test made is stopped, killed or removed at the end, also on failure."""
import argparse
import glob
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import Cases, Failure, check, equal  # noqa: E402

CASES = Cases()
case = CASES


class Env:
    def __init__(self, build, src):
        self.build = build
        self.src = src
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.tmp = tempfile.mkdtemp(prefix="ht-sessions-", dir=base)
        os.chmod(self.tmp, 0o700)
        self.xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(self.xdg, 0o700)
        self.heaptrail = os.path.join(build, "bin", "heaptrail")
        self.worker = os.path.join(build, "tests", "sessions", "worker")
        self.procs = []
        self.env = dict(os.environ)
        self.env["XDG_RUNTIME_DIR"] = self.xdg
        self.env.pop("HEAPTRAIL_SESSION", None)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def run(self, argv, timeout=120, env=None, **kw):
        e = dict(self.env)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           cwd=self.tmp, env=e, **kw)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def ht(self, *args, want_rc=0, **kw):
        rc, out, err = self.run([self.heaptrail] + list(args), **kw)
        if want_rc is not None and rc != want_rc:
            raise Failure("heaptrail %s: exit %d (want %d): %s" % (" ".join(args), rc, want_rc, err.strip()))
        return out, err

    def spawn(self, base, *extra):
        """A worker allocating base + phase bytes every 5 ms; returns it once it runs."""
        p = subprocess.Popen([self.worker, str(base)] + list(extra), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, cwd=self.tmp, env=self.env)
        self.procs.append(p)
        if "wait" not in extra:
            self.wait_line(p, "ready")
        return p

    def wait_line(self, p, prefix, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = p.stdout.readline().decode()
            if not line:
                raise Failure("worker %d ended before printing %r" % (p.pid, prefix))
            if line.startswith(prefix):
                return line
        raise Failure("worker %d did not print %r" % (p.pid, prefix))

    def allocs_made(self, p):
        """The allocations p (a worker) made so far, by its own count."""
        p.send_signal(signal.SIGWINCH)
        return int(self.wait_line(p, "count ").split()[1])

    def wait_allocs(self, p, n):
        """Returns once p made n more allocations than it had: what a trace
        of it from now on must hold, however long a loaded machine keeps
        the worker waiting (a sleep of 0.3 s saw 5 of its usual 60)."""
        want = self.allocs_made(p) + n
        while self.allocs_made(p) < want:
            time.sleep(0.005)

    def sessions(self):
        out, _ = self.ht("sessions", "--format", "json")
        return json.loads(out)

    def events(self, trace):
        out, _ = self.ht("dump", "--format", "json", trace)
        return [json.loads(l) for l in out.splitlines() if l.strip()]

    def info(self, trace):
        out, _ = self.ht("info", "--format", "json", trace)
        return json.loads(out)

    def cleanup(self):
        # Sessions first (they detach from the workers), then the workers.
        try:
            for s in self.sessions():
                self.run([self.heaptrail, "stop", s["name"]], timeout=60)
        except Exception:
            pass
        for d in self.daemons():
            try:
                os.kill(d, signal.SIGKILL)
            except OSError:
                pass
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def daemons(self):
        """Every process that runs with our XDG_RUNTIME_DIR: session daemons
        (forked from heaptrail or the API programs) and workers."""
        found = []
        mark = ("XDG_RUNTIME_DIR=" + self.xdg).encode() + b"\0"
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if mark in f.read():
                        found.append(int(pid))
            except OSError:
                continue
        return found


def allocs(events, pid, size):
    return sum(1 for e in events if e["type"] == "alloc" and e["pid"] == pid and e["size"] == size)


@case
def two_pids(env):
    a, b = env.spawn(4001), env.spawn(4002)
    trace = env.path("two.htr")
    _, err = env.ht("start", "two", "-o", trace, "--pid", str(a.pid), str(b.pid))
    check("session 'two' started" in err, "start message: %r" % err)
    check(os.stat(trace).st_mode & 0o777 == 0o600, "the trace must be created 0600")
    for p in (a, b):
        env.wait_allocs(p, 11)
    out, err = env.ht("stop", "two")
    equal(out.strip(), trace, "stop prints where the trace is")
    check("events" in err and "0 lost" in err, "stop message: %r" % err)
    ev = env.events(trace)
    check(allocs(ev, a.pid, 4001) > 10, "allocations of the first process: %d" % allocs(ev, a.pid, 4001))
    check(allocs(ev, b.pid, 4002) > 10, "allocations of the second process: %d" % allocs(ev, b.pid, 4002))
    starts = sorted(e["pid"] for e in ev if e["type"] == "process_start")
    equal(starts, sorted([a.pid, b.pid]), "processes started in the trace")
    check(a.poll() is None and b.poll() is None, "both processes run on after stop")
    equal(env.sessions(), [], "no session after stop")
    check(not os.listdir(os.path.join(env.xdg, "heaptrail")), "stop leaves no file: %r" %
          os.listdir(os.path.join(env.xdg, "heaptrail")))


@case
def ring(env):
    """start --ring: flush writes the window of the newest events (twice, the
    session going on), stop writes the last one; a session without a ring
    refuses to flush."""
    a = env.spawn(3001, "threads", "250")
    trace = env.path("ring.htr")
    env.ht("start", "rg", "-o", trace, "--pid", str(a.pid), "--ring", "64K")
    # The collector's first look at the worker's map comes with a tick after
    # the attach: on a loaded machine the worker made 10 000 events before
    # it (found 373 ms in, the window starting at 336 ms). The windows below
    # are counted from once a flush shows the mappings it found.
    f0 = env.path("f0.htr")
    deadline = time.time() + 60
    while True:
        env.wait_allocs(a, 200)
        env.ht("flush", "rg", "-o", f0, "--force")
        if any(e.get("unseen") and e["type"] == "mmap" for e in env.events(f0)):
            break
        check(time.time() < deadline, "no flush shows the worker's map after 60 s")
    # 6000 allocations and their frees: about twice what 64K holds.
    env.wait_allocs(a, 6000)
    f1, f2 = env.path("f1.htr"), env.path("f2.htr")
    out, err = env.ht("flush", "rg", "-o", f1)
    equal(out.strip(), f1, "flush prints where the window is")
    w1 = env.info(f1)
    check(w1["window"] and w1["window"]["dropped"] > 0, "f1 is a window: %r" % w1["window"])
    equal(w1["totals"]["unknown_frees"], 0, "no free of an unknown block in the window")
    ev = env.events(f1)
    synth = [e for e in ev if e.get("synthetic")]
    check(any(e["type"] == "process_start" and e["pid"] == a.pid for e in synth),
          "the worker is in the window's prefix")
    kept = [e["size"] for e in ev if not e.get("synthetic") and e["type"] == "alloc"]
    check(kept and set(kept) == {3001}, "the window holds the worker's allocations: %r" % set(kept))
    check(any(e.get("unseen") and e["type"] == "mmap" for e in synth),
          "mappings found in /proc/PID/maps before the window are in its prefix")
    check(int(err.split("(")[1].split()[0]) == len([e for e in ev if not e.get("synthetic")]),
          "flush says how many events the window holds: %r" % err)
    _, err = env.ht("flush", "rg", "-o", f1, want_rc=2)
    check("exists" in err, "a second flush to the same file needs --force: %r" % err)
    a.send_signal(signal.SIGUSR1)
    env.wait_line(a, "phase 1")
    env.wait_allocs(a, 6000)
    env.ht("flush", "rg", "-o", f2)
    w2 = env.info(f2)
    check(w2["window"]["start_ns"] > w1["window"]["start_ns"], "the second window starts later")
    check(w2["window"]["dropped"] > w1["window"]["dropped"], "more dropped before it")
    kept = {e["size"] for e in env.events(f2) if not e.get("synthetic") and e["type"] == "alloc"}
    check(3002 in kept, "the second window holds phase 1's allocations: %r" % kept)
    env.ht("stop", "rg")
    last = env.info(trace)
    check(last["complete"] and last["window"], "stop writes the last window: %r" % last["window"])
    check(last["window"]["start_ns"] >= w2["window"]["start_ns"], "the last window is the newest")
    check(a.poll() is None, "the worker runs on")
    _, err = env.ht("start", "rg2", "--ring", "1M", "--max-size", "1G", want_rc=2)
    check("--max-size does not go with --ring" in err, "--ring with --max-size: %r" % err)
    # A full session, with --no-maps: no flush, and no mapping found in /proc/PID/maps.
    env.ht("start", "plain", "-o", env.path("plain.htr"), "--no-maps", "--pid", str(a.pid))
    _, err = env.ht("flush", "plain", "-o", env.path("p.htr"), want_rc=2)
    check("not a flight recorder" in err, "flush of a full session: %r" % err)
    env.wait_allocs(a, 11)
    env.ht("stop", "plain")
    ev = env.events(env.path("plain.htr"))
    check(allocs(ev, a.pid, 3002) > 10, "the plain session traced the worker")
    equal([e for e in ev if e.get("unseen")], [], "no found mappings with --no-maps")


def crash_window(env, trace, p, sig, what):
    """p, traced by a flight recorder writing trace, crashes on SIGUSR2 (after
    allocating 7777 bytes): the window goes to trace's .crash-PID file, with
    the process's end and its last allocation."""
    p.send_signal(signal.SIGUSR2)
    p.wait(timeout=20)
    equal(p.returncode, -sig, "%s: the worker died of signal %d as without heaptrail" % (what, sig))
    stem, ext = os.path.splitext(trace)
    crash = "%s.crash-%d%s" % (stem, p.pid, ext)
    deadline = time.time() + 20
    while not os.path.exists(crash) and time.time() < deadline:
        time.sleep(0.05)
    check(os.path.exists(crash), "%s: the crash wrote %s" % (what, crash))
    time.sleep(0.2)  # written by a temporary file renamed in place: complete once there
    info = env.info(crash)
    check(info["window"], "%s: the crash file is a window" % what)
    procs = [q for q in info["processes"] if q["pid"] == p.pid]
    check(len(procs) == 1 and procs[0]["signal"] == sig,
          "%s: the window says the process died of signal %d: %r" % (what, sig, procs))
    ev = env.events(crash)
    equal([e["size"] for e in ev if e["type"] == "alloc" and e["size"] == 7777], [7777],
          "%s: the allocation just before the crash is in the window" % what)


@case
def ring_crash(env):
    """A crash of a process attached with record -p (parent not traced) or
    traced by a start session writes its window: the recorder reports the
    signal in the session's header and the process dies of it as before."""
    for sig, mode in ((signal.SIGSEGV, "segv"), (signal.SIGABRT, "abort")):
        a = env.spawn(3101, mode)
        trace = env.path("rp-%s.htr" % mode)
        rec = subprocess.Popen([env.heaptrail, "record", "-p", str(a.pid), "--ring", "64K", "-o",
                                trace], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=env.tmp, env=env.env)
        env.procs.append(rec)
        # The crash comes as soon as record says it traces: a process that
        # dies within a millisecond of the attach, before any tick merged
        # its start, still ends in the trace with its crash (it had no
        # window 1 time in 7: the end never looked whether it was dead).
        line = rec.stderr.readline().decode()
        if "heaptrail: tracing 1 process" not in line:
            raise Failure("record -p said %r: %s" % (line, rec.stderr.read().decode()))
        crash_window(env, trace, a, sig, "record -p (%s)" % mode)
        _, err = rec.communicate(timeout=60)
        equal(rec.returncode, 0, "record -p ends with its process: %s" % err.decode())
        check(env.info(trace)["window"], "the final window is written too")

        b = env.spawn(3102, mode)
        trace = env.path("st-%s.htr" % mode)
        env.ht("start", "rc", "-o", trace, "--pid", str(b.pid), "--ring", "64K")
        time.sleep(1)
        crash_window(env, trace, b, sig, "start (%s)" % mode)
        env.ht("stop", "rc")


@case
def crashes_unreported(env):
    """Crashes of a start session's flight recorder that found the crash
    table full (no window written): sessions and stop say how many, as
    record does."""
    a = env.spawn(3201)
    trace = env.path("cu.htr")
    env.ht("start", "cu", "-o", trace, "--pid", str(a.pid), "--ring", "64K")
    equal(env.sessions()[0]["crashes_unreported"], 0, "no crash yet")
    out, _ = env.ht("sessions")
    check("crash" not in out, "the listing says nothing of crashes: %r" % out)
    shm = glob.glob(os.path.join(env.xdg, "**", "cu.shm"), recursive=True)
    equal(len(shm), 1, "the session's shared memory under XDG_RUNTIME_DIR: %r" % shm)
    bump = os.path.join(env.build, "tests", "sessions", "bump_crashes")
    rc, _, err = env.run([bump, shm[0], "3"])
    equal(rc, 0, "bump_crashes: %s" % err)
    deadline = time.time() + 20
    while env.sessions()[0]["crashes_unreported"] != 3 and time.time() < deadline:
        time.sleep(0.05)
    equal(env.sessions()[0]["crashes_unreported"], 3, "sessions --format json")
    out, _ = env.ht("sessions")
    check("3 crashes had no room in the crash table: no window written" in out,
          "the listing says it: %r" % out)
    _, err = env.ht("stop", "cu")
    check("warning: 3 crashes had no room in the session's crash table: their windows were "
          "not written" in err, "stop says it: %r" % err)


@case
def crash_window_unwritten(env):
    """A start session's flight recorder whose crash window cannot be
    written (its file exists, no --force) says so: sessions (text and JSON)
    and stop name the process, the file and why, and count the window
    another crash did write; the file in the way is left as it was."""
    a, b = env.spawn(3301, "segv"), env.spawn(3302, "abort")
    trace = env.path("cw.htr")
    blocker = env.path("cw.crash-%d.htr" % b.pid)
    with open(blocker, "w") as f:
        f.write("mine\n")
    env.ht("start", "cw", "-o", trace, "--pid", str(a.pid), "--pid", str(b.pid), "--ring", "64K")
    time.sleep(1)
    crash_window(env, trace, a, signal.SIGSEGV, "the window that can be written")
    b.send_signal(signal.SIGUSR2)
    b.wait(timeout=20)
    equal(b.returncode, -signal.SIGABRT, "the second worker died of SIGABRT")
    deadline = time.time() + 20
    while env.sessions()[0]["crash_windows_failed"] != 1 and time.time() < deadline:
        time.sleep(0.05)
    s = env.sessions()[0]
    equal((s["crash_windows"], s["crash_windows_failed"]), (1, 1), "sessions --format json")
    out, _ = env.ht("sessions")
    check("1 crash windows could not be written (process %d: already exists)" % b.pid in out,
          "the listing says it: %r" % out)
    _, err = env.ht("stop", "cw")
    check("warning: the window of process %d's crash could not be written to '%s': already "
          "exists\n" % (b.pid, blocker) in err, "stop says it: %r" % err)
    with open(blocker) as f:
        equal(f.read(), "mine\n", "the file in the way")


@case
def update(env):
    a, b = env.spawn(5001), env.spawn(5002)
    trace = env.path("upd.htr")
    env.ht("start", "upd", "-o", trace, "-p", str(a.pid), "-p", str(b.pid), "--stacks", "alloc,free")
    for p in (a, b):
        env.wait_allocs(p, 6)  # traced, with stacks: the counts below need more than 5
    _, err = env.ht("update", "upd", "--pid", str(a.pid))
    equal(err, "heaptrail: session 'upd' now traces 1 process\n", "update --pid says")
    _, err = env.ht("update", "upd", "--stacks", "none")  # without --pid: the set stays
    equal(err, "heaptrail: session 'upd' now captures no call stacks\n", "update --stacks none says")
    s = env.sessions()
    equal(s[0]["pids"], [a.pid], "pids after update")
    check(b.poll() is None, "the removed process keeps running")
    # Both move on to a new allocation size; only a's new size may be traced.
    for p in (a, b):
        p.send_signal(signal.SIGUSR1)
        env.wait_line(p, "phase 1")
    for p in (a, b):
        env.wait_allocs(p, 6)  # a's traced without stacks, b's untraced
    check(b.poll() is None, "the removed process is still running")
    # The session survives its process exiting, and a new one joins.
    a.terminate()
    a.wait()
    time.sleep(0.2)
    equal([x["name"] for x in env.sessions()], ["upd"], "session alive after its process exited")
    c = env.spawn(5003)
    _, err = env.ht("update", "upd", "--pid", str(c.pid), "--stacks", "none")
    equal(err, "heaptrail: session 'upd' now traces 1 process\n"
               "heaptrail: session 'upd' now captures no call stacks\n", "update of both says both")
    env.wait_allocs(c, 6)
    env.ht("stop", "upd")
    ev = env.events(trace)
    check(allocs(ev, a.pid, 5002) > 5, "a's allocations after the update: %d" % allocs(ev, a.pid, 5002))
    check(allocs(ev, b.pid, 5002) > 5, "b's allocations before the update: %d" % allocs(ev, b.pid, 5002))
    equal(allocs(ev, b.pid, 5003), 0, "b's allocations after it was removed")
    check(allocs(ev, c.pid, 5003) > 5, "c's allocations: %d" % allocs(ev, c.pid, 5003))
    # --stacks none from the update on: a's later allocations carry no stack.
    stacks = lambda pid, size: {bool(e["stack"]) for e in ev if e["type"] == "alloc" and e["pid"] == pid
                                and e["size"] == size}
    check(True in stacks(a.pid, 5001), "stacks of a's allocations before the update")
    equal(stacks(a.pid, 5002), {False}, "stacks of a's allocations after 'update --stacks none'")
    exits = [e for e in ev if e["type"] == "process_exit" and e["pid"] == a.pid]
    equal(len(exits), 1, "a's exit is in the trace")
    starts = sorted(e["pid"] for e in ev if e["type"] == "process_start")
    equal(starts, sorted([a.pid, b.pid, c.pid]), "one trace holds every process")
    # Parents in the process table: all three are children of this test.
    tree = env.info(trace)["processes"]
    equal(sorted(p["ppid"] for p in tree), [os.getpid()] * 3, "parents in the process table")
    check(b.poll() is None and c.poll() is None, "processes run on after stop")


@case
def errors(env):
    a = env.spawn(6001)
    env.ht("start", "dup", "-o", env.path("dup.htr"), "--pid", str(a.pid))
    _, err = env.ht("start", "dup", "-o", env.path("dup2.htr"), want_rc=2)
    check("already exists" in err, "second start: %r" % err)
    check(not os.path.exists(env.path("dup2.htr")), "a failed start writes no trace")
    _, err = env.ht("stop", "nosuch", want_rc=2)
    check("no session 'nosuch'" in err, "stop of an unknown session: %r" % err)
    _, err = env.ht("update", "nosuch", "--pid", str(a.pid), want_rc=2)
    check("no session 'nosuch'" in err, "update of an unknown session: %r" % err)
    _, err = env.ht("start", "bad/name", want_rc=2)
    check("invalid session name" in err, "bad name: %r" % err)
    _, err = env.ht("start", "gone", "--pid", "2147483000", want_rc=2)
    check("no process 2147483000" in err, "start on a missing pid: %r" % err)
    _, err = env.ht("start", "again", "-o", env.path("dup.htr"), want_rc=2)
    check("exists" in err and "--force" in err, "start over an existing trace: %r" % err)
    # A start that failed leaves no file that would read as a daemon that died.
    left = sorted(f for f in os.listdir(os.path.join(env.xdg, "heaptrail")) if f.startswith(("gone.", "again.")))
    equal(left, [], "files of the failed starts")
    _, err = env.ht("stop", "gone", want_rc=2)
    check("no session 'gone'" in err, "stop after a failed start: %r" % err)
    _, err = env.ht("update", "dup", "--pid", "2147483000", want_rc=2)
    check("no process 2147483000" in err, "update with a missing pid: %r" % err)
    equal(env.sessions()[0]["pids"], [a.pid], "a failed update changes nothing")
    _, err = env.ht("update", "dup", want_rc=2)
    check("nothing to change" in err, "update without changes: %r" % err)
    env.ht("update", "dup", "--pid", "none")
    equal(env.sessions()[0]["pids"], [], "update --pid none")
    check(a.poll() is None, "the process detached by '--pid none' runs on")
    _, err = env.ht("start", "x", "--stacks", "alloc,bogus", want_rc=2)
    check("unknown stack event 'bogus'" in err, "bad stack list: %r" % err)
    equal([s["name"] for s in env.sessions()], ["dup"], "only the first session runs")
    env.ht("stop", "dup")
    # A daemon that was killed leaves files behind: not listed, and the name is free.
    env.ht("start", "stale", "-o", env.path("stale.htr"))
    daemon = env.sessions()[0]["daemon_pid"]
    os.kill(daemon, signal.SIGKILL)
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % daemon) and time.time() < deadline:
        time.sleep(0.05)
    equal(env.sessions(), [], "a killed session is not listed")
    _, err = env.ht("stop", "stale", want_rc=2)
    check("no session 'stale'" in err, "stop of a killed session: %r" % err)
    env.ht("start", "stale", "-o", env.path("stale2.htr"))
    equal([s["name"] for s in env.sessions()], ["stale"], "the name of a killed session is free again")
    env.ht("stop", "stale")
    # Root finds a session of the system's directory by name (the AutoLogger's
    # in /run/heaptrail; control.c's system_sock), under HEAPTRAIL_ROOT.
    root = env.path("sysroot")
    os.makedirs(os.path.join(root, "run"), 0o700)
    system = {"XDG_RUNTIME_DIR": os.path.join(root, "run")}
    env.ht("start", "sys", "-o", env.path("sys.htr"), env=system)
    stopped = False
    try:
        _, err = env.ht("stop", "sys", want_rc=2, env={"HEAPTRAIL_ROOT": env.path("elsewhere")})
        check("no session 'sys'" in err, "stop of a system session under another root: %r" % err)
        env.ht("stop", "sys", env={"HEAPTRAIL_ROOT": root})
        stopped = True
    finally:
        if not stopped:  # cleanup() would not find it: another directory
            env.run([env.heaptrail, "stop", "sys"], env=system)
    check(env.info(env.path("sys.htr"))["complete"], "the system session's trace, stopped by name")


@case
def json_fields(env):
    a = env.spawn(7001)
    trace = env.path("js.htr")
    env.ht("start", "js", "-o", trace, "--pid", str(a.pid), "--buffer-size", "64K", "--buffers", "32",
           "--lossy")
    time.sleep(0.3)
    s = env.sessions()
    equal(len(s), 1, "one session")
    s = s[0]
    for key, typ in (("name", str), ("file", str), ("pids", list), ("events", int), ("events_lost", int),
                     ("buffers", int), ("buffer_size", int), ("buffers_used", int), ("daemon_pid", int)):
        check(isinstance(s.get(key), typ), "field %s: %r" % (key, s.get(key)))
    equal(s["name"], "js", "name")
    equal(s["file"], trace, "file")
    equal(s["pids"], [a.pid], "pids")
    equal(s["buffers"], 32, "buffers")
    equal(s["buffer_size"], 65536, "buffer_size")
    equal(s["events_lost"], 0, "events_lost")
    equal(s["lossy"], True, "lossy")
    check(s["events"] > 0, "events: %d" % s["events"])
    check(s["buffers_used"] >= 1, "buffers_used: %d" % s["buffers_used"])
    out, _ = env.ht("sessions")
    check("js" in out and trace in out and str(a.pid) in out, "text listing: %r" % out)
    env.ht("stop", "js")
    out, _ = env.ht("sessions")
    equal(out.strip(), "no sessions", "listing after stop")


@case
def permissions(env):
    a = env.spawn(8001)
    trace = env.path("perm.htr")
    env.ht("start", "perm", "-o", trace, "--pid", str(a.pid))
    d = os.path.join(env.xdg, "heaptrail")
    files = sorted(os.listdir(d))
    equal(files, ["perm.ctl", "perm.lock", "perm.shm"], "session files")
    for f in files:
        equal(stat.S_IMODE(os.stat(os.path.join(d, f)).st_mode), 0o600, "mode of " + f)
    equal(stat.S_IMODE(os.stat(d).st_mode), 0o700, "mode of the session directory")
    equal(stat.S_IMODE(os.stat(trace).st_mode), 0o600, "mode of the trace")
    nobody = pwd.getpwnam("nobody")
    as_nobody = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups"]
    # Another user cannot reach the socket (it does not even see the
    # directory: it looks in its own), read the buffers or stop it ...
    rc, out, err = env.run(as_nobody + [env.heaptrail, "stop", "perm"])
    check(rc != 0 and ("permission denied" in err or "no session" in err),
          "stop by another user: rc %d, %r" % (rc, err))
    equal([s["name"] for s in env.sessions()], ["perm"], "the session still runs")
    rc, _, err = env.run(as_nobody + ["cat", os.path.join(d, "perm.shm")])
    check(rc != 0, "another user read the session's buffers")
    # ... and with the directory opened up, the daemon's peer check refuses.
    os.chmod(env.tmp, 0o711)
    os.chmod(env.xdg, 0o711)
    os.chmod(d, 0o711)
    os.chmod(os.path.join(d, "perm.ctl"), 0o666)
    try:
        for verb in (["stop", "perm"], ["update", "perm", "--pid", "1"]):
            rc, out, err = env.run(as_nobody + [env.heaptrail] + verb)
            check(rc != 0 and "another user" in err, "%s by another user: rc %d, %r" % (verb[0], rc, err))
    finally:
        os.chmod(os.path.join(d, "perm.ctl"), 0o600)
        os.chmod(d, 0o700)
        os.chmod(env.xdg, 0o700)
        os.chmod(env.tmp, 0o700)
    equal([s["name"] for s in env.sessions()], ["perm"], "the session still runs")
    env.ht("stop", "perm")
    check(a.poll() is None, "the process runs on")


@case
def api(env):
    rc, out, err = env.run([os.path.join(env.build, "tests", "sessions", "test_control"), env.worker],
                           env={"TMPDIR": env.tmp})
    if rc != 0:
        raise Failure("test_control: exit %d: %s%s" % (rc, out, err))
    equal(env.sessions(), [], "no session left by test_control")


@case
def suspended(env):
    trace = env.path("susp.htr")
    rc, out, err = env.run([os.path.join(env.build, "examples", "suspended"), trace])
    if rc != 0:
        raise Failure("suspended: exit %d: %s" % (rc, err))
    check("child" in out and "exited with 0" in out, "suspended output: %r" % out)
    check("events lost: 0" in out, "suspended output: %r" % out)
    ev = env.events(trace)
    child = [e["pid"] for e in ev if e["type"] == "process_start"]
    equal(len(child), 1, "one process in the trace")
    # Every allocation of the child's work, from the first one.
    sizes = sorted(e["size"] for e in ev if e["type"] == "alloc" and 1000 <= e["size"] < 1100)
    equal(sizes, list(range(1000, 1100)), "the child's 100 allocations")
    frees = sum(1 for e in ev if e["type"] == "free")
    equal(frees, 50, "the child's frees")
    check(all(e["stack"] for e in ev if e["type"] in ("alloc", "free")), "stacks on alloc and free")
    written = int(out.split("events written:")[1].split()[0])
    equal(written, len(ev), "events written as the properties say")
    equal(env.sessions(), [], "no session left by the example")



# ---- IFEO and the AutoLogger: inside a private mount namespace ----
#
# The case runs itself again under `unshare --mount` (--inside); there /etc
# gets an overlay whose upper layer is in the test's directory, so the
# registry, /etc/ld.so.preload and the unit are written there and vanish
# with the namespace. The real /etc is compared before and after.

OTHER_PRELOAD = "/lib/x86_64-linux-gnu/libdl.so.2"  # a harmless entry of "someone else"


def in_namespace(env, name):
    before = etc_state()
    py = sys.executable
    rc, out, err = env.run(["unshare", "--mount", "--propagation", "private", py, os.path.abspath(__file__),
                            "--build", env.build, "--src", env.src, "--inside", name], timeout=170)
    equal(etc_state(), before, "the real /etc after the test")
    if rc != 0:
        raise Failure("inside the namespace: exit %d\n%s%s" % (rc, out, err))


def etc_state():
    state = {}
    for p in ("/etc/ld.so.preload", "/etc/heaptrail", "/etc/systemd/system/heaptrail-autologger.service"):
        try:
            st = os.lstat(p)
            state[p] = (st.st_mode, st.st_size, st.st_mtime_ns)
        except OSError:
            state[p] = None
    return state


def overlay_etc(env):
    upper, work = env.path("etc-upper"), env.path("etc-work")
    os.mkdir(upper)
    os.mkdir(work)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    "lowerdir=/etc,upperdir=%s,workdir=%s" % (upper, work), "/etc"], check=True)
    env.env.pop("HEAPTRAIL_ROOT", None)


def pending_buffer(pid):
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("/memfd:heaptrail-pending"):
                return True
        except OSError:
            pass
    return False


@case
def ifeo(env):
    in_namespace(env, "ifeo")


def inside_ifeo(env):
    overlay_etc(env)
    have_other = os.path.exists(OTHER_PRELOAD)
    if have_other:
        with open("/etc/ld.so.preload", "w") as f:
            f.write(OTHER_PRELOAD + "\n")
    out, _ = env.ht("ifeo", "list")
    check("not installed" in out, "hook before install: %r" % out)
    env.ht("ifeo", "install")
    hook = os.path.realpath(os.path.join(env.build, "lib", "libheaptrail-ifeo.so"))
    lines = open("/etc/ld.so.preload").read().split()
    equal(lines, ([OTHER_PRELOAD] if have_other else []) + [hook], "ld.so.preload after install")
    out, _ = env.ht("ifeo", "install")
    check("already" in out, "second install: %r" % out)
    equal(open("/etc/ld.so.preload").read().split().count(hook), 1, "the hook is listed once")
    env.ht("ifeo", "enable", "worker")
    env.ht("ifeo", "enable", "/usr/bin/true")
    _, err = env.ht("ifeo", "enable", "x", "--flags", "bogus", want_rc=2)
    check("unknown IFEO flags 'bogus'" in err, "bad flags: %r" % err)
    js = json.loads(env.ht("ifeo", "list", "--format", "json")[0])
    equal(js["hook_installed"], True, "hook_installed")
    equal([(p["name"], p["paths"]) for p in js["programs"]],
          [("true", ["/usr/bin/true"]), ("worker", [])], "enabled programs")
    for f in os.listdir("/etc/heaptrail/ifeo"):
        equal(stat.S_IMODE(os.stat("/etc/heaptrail/ifeo/" + f).st_mode), 0o644, "mode of the entry " + f)

    trace = env.path("ifeo.htr")
    env.ht("start", "ifs", "--ifeo", "-o", trace)
    _, err = env.ht("start", "ifs2", "--ifeo", "-o", env.path("ifs2.htr"), want_rc=2)
    check("IFEO session is running already" in err, "a second IFEO session: %r" % err)
    w = env.spawn(9101)  # enabled by name: traced through /etc/ld.so.preload
    other = env.path("other")
    os.symlink(env.worker, other)
    p = subprocess.Popen([other, "9102"], stdout=subprocess.PIPE, cwd=env.tmp, env=env.env)
    env.procs.append(p)
    env.wait_line(p, "ready")
    time.sleep(0.4)
    pids = env.sessions()[0]["pids"]
    equal(pids, [w.pid], "pids of the IFEO session")
    check(not pending_buffer(p.pid), "a program that is not enabled has no buffer")
    w.terminate()
    n = int(env.wait_line(w, "allocs").split()[1])
    w.wait()
    env.ht("stop", "ifs")
    ev = env.events(trace)
    equal(allocs(ev, w.pid, 109101), 1, "the enabled program's first allocation")
    equal(allocs(ev, w.pid, 9101), n, "every allocation of the enabled program")
    equal([e for e in ev if e["pid"] == p.pid], [], "events of the program that is not enabled")
    equal(env.info(trace)["events_lost"], 0, "events lost")

    # The link left by a killed IFEO session is not joined: the program buffers instead.
    env.ht("start", "dead", "--ifeo", "-o", env.path("dead.htr"))
    daemon = env.sessions()[0]["daemon_pid"]
    os.kill(daemon, signal.SIGKILL)
    while os.path.exists("/proc/%d" % daemon):
        time.sleep(0.05)
    time.sleep(1.1)
    late = env.spawn(9104)
    check(pending_buffer(late.pid), "a program started after its session was killed buffers in memory")
    late.kill()
    late.wait()

    # Setuid programs are never traced, even when enabled.
    shared = tempfile.mkdtemp(prefix="ht-suid-", dir="/dev/shm")
    try:
        os.chmod(shared, 0o755)
        exe = os.path.join(shared, "worker")
        shutil.copy(env.worker, exe)
        nobody = pwd.getpwnam("nobody")
        as_nobody = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups"]
        seen = {}
        for mode in (0o4755, 0o755):
            os.chmod(exe, mode)
            q = subprocess.Popen(as_nobody + [exe, "9103"], stdout=subprocess.PIPE, cwd=shared, env=env.env)
            env.procs.append(q)
            env.wait_line(q, "ready")
            seen[mode] = pending_buffer(q.pid)
            q.kill()
            q.wait()
        equal(seen, {0o4755: False, 0o755: True}, "hook acted (setuid, plain) as another user")
    finally:
        shutil.rmtree(shared, ignore_errors=True)

    env.ht("ifeo", "disable", "worker")
    env.ht("ifeo", "disable", "/usr/bin/true")
    _, err = env.ht("ifeo", "disable", "worker", want_rc=2)
    check("not enabled" in err, "disable twice: %r" % err)
    equal(os.listdir("/etc/heaptrail/ifeo"), [], "registry after disable")
    env.ht("ifeo", "uninstall")
    if have_other:
        equal(open("/etc/ld.so.preload").read().split(), [OTHER_PRELOAD], "ld.so.preload after uninstall")
    else:
        check(not os.path.exists("/etc/ld.so.preload"), "ld.so.preload removed when it held only the hook")


@case
def relay_loss(env):
    in_namespace(env, "relay_loss")


def inside_relay_loss(env):
    """A program that lost events in its buffer before its IFEO session
    (40000 allocations at once, more than the buffer holds): the session
    relays its losses by process, so its allocations in the trace plus its
    own lost count are exactly 40000, and they are all the trace lost."""
    overlay_etc(env)
    env.ht("ifeo", "install")
    env.ht("ifeo", "enable", "worker")
    w = env.spawn(9401, "burst")
    env.wait_line(w, "burst")
    check(pending_buffer(w.pid), "the program keeps its events in memory before the session")
    trace = env.path("relay.htr")
    env.ht("start", "rl", "--ifeo", "-o", trace)
    deadline = time.time() + 20
    while env.sessions()[0]["pids"] != [w.pid]:
        check(time.time() < deadline, "the early program joins the session")
        time.sleep(0.1)
    w.stdin.write(b"g")
    w.stdin.flush()
    time.sleep(0.3)
    w.terminate()
    n = int(env.wait_line(w, "allocs").split()[1])
    w.wait()
    env.ht("stop", "rl")
    ev = env.events(trace)
    info = env.info(trace)
    procs = [p for p in info["processes"] if p["pid"] == w.pid]
    equal(len(procs), 1, "the program in the trace")
    lost = procs[0]["events_lost_by_cause"]["lossy"]
    check(lost > 0, "the program lost events in its buffer: %r" % procs[0])
    equal(allocs(ev, w.pid, 13) + lost, 40000, "allocations of the burst in the trace + lost")
    equal(procs[0]["events_lost"], lost, "the program lost only by its full buffer")
    equal(info["events_lost"], lost, "the trace's lost events are the program's")
    check(procs[0]["lost_from_ns"] is not None and
          procs[0]["lost_from_ns"] <= min(e["ts"] for e in ev if e["pid"] == w.pid and
                                          e["type"] == "alloc" and e["size"] == 9401),
          "lost from before the program's loop: %r" % procs[0])
    equal(allocs(ev, w.pid, 9401), n, "every allocation of the loop")
    env.ht("ifeo", "disable", "worker")
    env.ht("ifeo", "uninstall")


@case
def boot(env):
    in_namespace(env, "boot")


def inside_boot(env):
    """A boot: the program starts before the session, which then starts as
    systemd would start the AutoLogger's unit; nothing may be lost."""
    overlay_etc(env)
    trace = env.path("boot.htr")
    env.ht("ifeo", "enable", "worker")
    env.ht("autologger", "enable", "-o", trace, "--max-size", "64M", "--stacks", "alloc,free")
    unit = open("/etc/systemd/system/heaptrail-autologger.service").read()
    check(os.path.realpath(os.path.join(env.build, "lib", "libheaptrail-ifeo.so")) in
          open("/etc/ld.so.preload").read(), "enable installs the hook")
    w = env.spawn(9201, "threads")  # four threads sharing one allocation stack
    time.sleep(0.3)
    check(pending_buffer(w.pid), "the program keeps its events in memory before the session")
    exec_start = [l[len("ExecStart="):] for l in unit.splitlines() if l.startswith("ExecStart=")][0]
    rc, out, err = env.run(exec_start.split())
    equal(rc, 0, "ExecStart of the unit (%s)" % err.strip())
    time.sleep(0.4)
    out, _ = env.ht("autologger", "status")
    check("session:  running" in out and "1 process" in out, "status: %r" % out)
    equal(env.sessions()[0]["pids"], [w.pid], "the early program is in the session")
    w.terminate()
    n = int(env.wait_line(w, "allocs").split()[1])
    w.wait()
    exec_stop = [l[len("ExecStop="):] for l in unit.splitlines() if l.startswith("ExecStop=")][0]
    rc, out, err = env.run(exec_stop.split())
    equal(rc, 0, "ExecStop of the unit (%s)" % err.strip())
    ev = env.events(trace)
    equal(allocs(ev, w.pid, 109201), 1, "the program's first allocation, made before the session")
    equal(allocs(ev, w.pid, 9201), n, "every allocation of the program")
    # Stack ids are renumbered per buffer: the three threads of one call site share one.
    by_tid = {}
    for e in ev:
        if e["type"] == "alloc" and e["pid"] == w.pid and e["size"] == 9201:
            by_tid.setdefault(e["tid"], set()).add(e["stack"])
    equal(len(by_tid), 4, "threads that allocated")
    loop_stacks = set().union(*(v for t, v in by_tid.items() if t != w.pid))
    check(len(loop_stacks) == 1 and 0 not in loop_stacks, "the threads' shared stack: %r" % loop_stacks)
    check(loop_stacks != by_tid[w.pid], "main's own call site has its own stack")
    equal(env.info(trace)["warnings"], [], "warnings reading the trace")
    # Before the session the program captured the default stacks (no frees);
    # from the session's start on, the session's (--stacks alloc,free).
    frees = [e for e in ev if e["type"] == "free" and e["pid"] == w.pid]
    check(len(frees) >= n, "frees: %d of %d" % (len(frees), n))
    check(not frees[0]["stack"] and frees[-1]["stack"], "free stacks: none before the session, then some")
    info = env.info(trace)
    equal(info["events_lost"], 0, "events lost")
    first = min(e["ts"] for e in ev if e["pid"] == w.pid)
    check(first < 400e6, "the trace starts with the program, not the session (first event at %d ns)" % first)
    env.ht("autologger", "disable")
    check(not os.path.exists("/etc/systemd/system/heaptrail-autologger.service"), "unit after disable")


@case
def autologger(env):
    root = env.path("root")
    os.mkdir(root)
    env.env["HEAPTRAIL_ROOT"] = root
    trace = env.path("al.htr")
    _, err = env.ht("autologger", "enable", "-o", "relative.htr", want_rc=2)
    check("absolute path" in err, "relative trace path: %r" % err)
    _, err = env.ht("autologger", "enable", "--max-size", "lots", want_rc=2)
    check("invalid size 'lots'" in err, "bad size: %r" % err)
    out, _ = env.ht("autologger", "status")
    check("not installed" in out and "not running" in out, "status before: %r" % out)
    env.ht("autologger", "enable", "-o", trace, "--max-size", "10M", "--buffers", "64")
    unit_path = os.path.join(root, "etc/systemd/system/heaptrail-autologger.service")
    unit = open(unit_path).read()
    link = os.path.join(root, "etc/systemd/system/sysinit.target.wants/heaptrail-autologger.service")
    equal(os.readlink(link), "../heaptrail-autologger.service", "the enable link")
    for want in ("DefaultDependencies=no", "Before=sysinit.target", "WantedBy=sysinit.target", "Type=forking",
                 "start autologger --ifeo --force -q -o %s --max-size 10M --buffers 64" % trace,
                 "ExecStop=%s stop -q autologger" % os.path.realpath(env.heaptrail)):
        check(want in unit, "unit has %r:\n%s" % (want, unit))
    out, _ = env.ht("autologger", "unit", "-o", trace, "--max-size", "10M", "--buffers", "64")
    equal(out, unit, "'autologger unit' prints what enable installs")
    hook = os.path.realpath(os.path.join(env.build, "lib", "libheaptrail-ifeo.so"))
    equal(open(os.path.join(root, "etc/ld.so.preload")).read().split(), [hook], "the hook installed under the root")
    if shutil.which("systemd-analyze"):
        rc, out, err = env.run(["systemd-analyze", "verify", unit_path])
        equal((rc, (out + err).strip()), (0, ""), "systemd-analyze verify")
    out, _ = env.ht("autologger", "status")
    check("(enabled)" in out and "--max-size 10M" in out, "status: %r" % out)
    # The size limit: a session with --max-size ends by itself and finishes its trace.
    w = env.spawn(9301)
    small = env.path("small.htr")
    env.ht("start", "capped", "-o", small, "--pid", str(w.pid), "--max-size", "4K")
    daemon = env.sessions()[0]["daemon_pid"]
    deadline = time.time() + 90
    while os.path.exists("/proc/%d" % daemon) and time.time() < deadline:
        time.sleep(0.2)
    check(not os.path.exists("/proc/%d" % daemon), "the capped session ended by itself")
    equal(env.sessions(), [], "sessions after the capped one ended")
    check(env.info(small)["complete"], "the capped trace is complete")
    check(w.poll() is None, "the process runs on")
    env.ht("autologger", "disable")
    check(not os.path.exists(unit_path) and not os.path.lexists(link), "unit and link after disable")
    # The registry, the hook and the unit are root's (without a test root).
    nobody = pwd.getpwnam("nobody")
    as_nobody = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups"]
    for args in (["ifeo", "enable", "x"], ["ifeo", "install"], ["autologger", "enable"]):
        rc, _, err = env.run(as_nobody + [env.heaptrail] + args, env={"HEAPTRAIL_ROOT": None})
        check(rc == 2 and "needs root" in err, "%s as another user: rc %d, %r" % (" ".join(args), rc, err))
    out, _ = env.ht("autologger", "disable")
    check("not enabled" in out, "disable twice: %r" % out)


INSIDE = {"ifeo": inside_ifeo, "boot": inside_boot, "relay_loss": inside_relay_loss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--inside", choices=sorted(INSIDE))
    ap.add_argument("case", nargs="?", choices=sorted(CASES))
    args = ap.parse_args()
    env = Env(os.path.abspath(args.build), os.path.abspath(args.src))
    name = args.inside or args.case
    try:
        (INSIDE[args.inside] if args.inside else CASES[args.case])(env)
    except Failure as e:
        print("FAIL %s: %s" % (name, e))
        return 1
    finally:
        env.cleanup()
    print("ok %s" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
