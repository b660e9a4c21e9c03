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

CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def equal(got, want, what):
    if got != want:
        raise Failure("%s: got %r, want %r" % (what, got, want))


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
        if env:
            e.update(env)
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
        if not extra:
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
    _, err = env.ht("start", "two", "-o", trace, "--pid", "%d,%d" % (a.pid, b.pid))
    check("session 'two' started" in err, "start message: %r" % err)
    check(os.stat(trace).st_mode & 0o777 == 0o600, "the trace must be created 0600")
    time.sleep(0.4)
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
def update(env):
    a, b = env.spawn(5001), env.spawn(5002)
    trace = env.path("upd.htr")
    env.ht("start", "upd", "-o", trace, "-p", str(a.pid), "-p", str(b.pid), "--stacks", "alloc,free")
    time.sleep(0.3)
    env.ht("update", "upd", "--pid", str(a.pid))
    s = env.sessions()
    equal(s[0]["pids"], [a.pid], "pids after update")
    check(b.poll() is None, "the removed process keeps running")
    # Both move on to a new allocation size; only a's new size may be traced.
    for p in (a, b):
        p.send_signal(signal.SIGUSR1)
        env.wait_line(p, "phase 1")
    time.sleep(0.3)
    check(b.poll() is None, "the removed process is still running")
    # The session survives its process exiting, and a new one joins.
    a.terminate()
    a.wait()
    time.sleep(0.2)
    equal([x["name"] for x in env.sessions()], ["upd"], "session alive after its process exited")
    c = env.spawn(5003)
    env.ht("update", "upd", "--pid", str(c.pid))
    time.sleep(0.3)
    env.ht("stop", "upd")
    ev = env.events(trace)
    check(allocs(ev, a.pid, 5002) > 5, "a's allocations after the update: %d" % allocs(ev, a.pid, 5002))
    check(allocs(ev, b.pid, 5002) > 5, "b's allocations before the update: %d" % allocs(ev, b.pid, 5002))
    equal(allocs(ev, b.pid, 5003), 0, "b's allocations after it was removed")
    check(allocs(ev, c.pid, 5003) > 5, "c's allocations: %d" % allocs(ev, c.pid, 5003))
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
    _, err = env.ht("update", "dup", "--pid", "2147483000", want_rc=2)
    check("no process 2147483000" in err, "update with a missing pid: %r" % err)
    equal(env.sessions()[0]["pids"], [a.pid], "a failed update changes nothing")
    _, err = env.ht("start", "x", "--stacks", "alloc,bogus", want_rc=2)
    check("unknown stack event 'bogus'" in err, "bad stack list: %r" % err)
    equal([s["name"] for s in env.sessions()], ["dup"], "only the first session runs")
    env.ht("stop", "dup")


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    env = Env(os.path.abspath(args.build), os.path.abspath(args.src))
    try:
        CASES[args.case](env)
    except Failure as e:
        print("FAIL %s: %s" % (args.case, e))
        return 1
    finally:
        env.cleanup()
    print("ok %s" % args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
