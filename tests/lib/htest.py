"""htest.py - what every Python test script of heaptrail shares: a table of
named cases, the failure and skip exceptions, value checks, and running a
program in its own process group so nothing it starts outlives the test.

A script imports it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from htest import Cases, Failure, check, equal, run
and declares its cases with CASES = Cases(), case = CASES, @case."""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile


class Cases(dict):
    """A script's cases by name: the function name, '_' written '-'. An
    instance is also the decorator that adds a case."""

    def __call__(self, fn):
        self[fn.__name__.replace("_", "-")] = fn
        return fn


class Failure(Exception):
    """A check failed; the message says what was expected and what came."""


class Skip(Exception):
    """The case cannot run here (no root, no namespace); scripts exit 77."""


def check(cond, what):
    if not cond:
        raise Failure(what)


def equal(got, want, what):
    if got != want:
        raise Failure("%s: got %r, want %r" % (what, got, want))


class SoftChecks:
    """Checks that go on after a failure, for a script that runs one long
    scenario and reports every mismatch in it: check() prints "FAIL: what"
    and counts it (returning cond), done() prints the count ("ok" when none)
    and gives the exit status."""

    def __init__(self):
        self.failures = []

    def check(self, cond, what):
        if not cond:
            self.failures.append(what)
            print("FAIL:", what, file=sys.stderr)
        return cond

    def equal(self, got, want, what):
        return self.check(got == want, "%s: got %r, want %r" % (what, got, want))

    def done(self):
        print(f"{len(self.failures)} failure(s)" if self.failures else "ok")
        return 1 if self.failures else 0


def run(argv, cwd, env=None, timeout=60, stdin=subprocess.DEVNULL):
    """Runs argv in its own process group without the recorder's variables
    (HEAPTRAIL_SESSION, LD_PRELOAD) unless env gives them; kills the whole
    group afterwards. Returns (status, stdout, stderr) as text."""
    e = dict(os.environ)
    for k in ("HEAPTRAIL_SESSION", "LD_PRELOAD"):
        e.pop(k, None)
    if env:
        e.update(env)
    p = subprocess.Popen(argv, cwd=cwd, env=e, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise Failure("timed out after %d s: %s" % (timeout, " ".join(argv)))
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # leave nothing behind
        except ProcessLookupError:
            pass
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def killed_session_swept(heaptrail, pid, cwd):
    """The session file that `heaptrail record` (pid), killed with SIGKILL,
    left in the test's session directory (ctest gives each test one:
    tests/CMakeLists.txt) is there, holding its rings' memory, until the
    next record removes it (remove_stale, src/session/session.c)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    check(xdg, "XDG_RUNTIME_DIR is unset: run the test with ctest")
    pattern = os.path.join(xdg, "heaptrail", "session-%d-*" % pid)
    left = glob.glob(pattern)
    equal(len(left), 1, "files of the killed collector (%s)" % pattern)
    rc, _, err = run([heaptrail, "record", "-q", "--force", "-o", os.path.join(cwd, "swept.htr"), "--",
                      "true"], cwd)
    equal(rc, 0, "the next record (%s)" % err.strip())
    equal(glob.glob(pattern), [], "the killed collector's file after the next record")
    os.unlink(os.path.join(cwd, "swept.htr"))


def _start_time(pid):
    """The start time of process pid (clock ticks since boot), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owned_tmpdir(prefix):
    """tempfile.mkdtemp(prefix=prefix) named after this process (PREFIX
    PID.START-XXXX), once the directories of the prefix whose process is
    gone are removed: a test that ctest's timeout kills (SIGKILL) removes
    nothing itself, and every process of the test is killed with it."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        rest = name[len(prefix):] if name.startswith(prefix) else ""
        owner = rest.split("-", 1)[0].split(".")
        if len(owner) != 2 or not owner[0].isdigit():
            continue
        d = os.path.join(base, name)
        try:
            if os.lstat(d).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if _start_time(int(owner[0])) != owner[1]:
            shutil.rmtree(d, ignore_errors=True)
    return tempfile.mkdtemp(prefix="%s%d.%s-" % (prefix, os.getpid(), _start_time(os.getpid())))


def case_main(cases, make_env, prefix, own_cache=False):
    """The command line of a script run by ctest: --build DIR --src DIR
    [--keep] CASE. Runs the case with make_env(build, src, tmp) in a fresh
    temporary directory (kept with --keep after a failure), and with
    own_cache in a fresh heaptrail symbol cache too. Returns the exit status:
    0 passed, 1 failed, 77 skipped."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("case", choices=sorted(cases))
    args = ap.parse_args()
    tmp = owned_tmpdir(prefix)
    cache = None
    if own_cache:
        cache = owned_tmpdir(prefix + "cache-")
        os.environ["XDG_CACHE_HOME"] = cache
    try:
        env = make_env(os.path.abspath(args.build), os.path.abspath(args.src), tmp)
        cases[args.case](env)
    except Skip as e:
        print("skip %s: %s" % (args.case, e))
        return 77
    except Failure as e:
        print("FAIL %s: %s" % (args.case, e), file=sys.stderr)
        if args.keep:
            print("kept %s" % tmp, file=sys.stderr)
        return 1
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("ok %s" % args.case)
    return 0
