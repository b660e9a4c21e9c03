"""htest.py - what every Python test script of heaptrail shares: a table of
named cases, the failure and skip exceptions, value checks, and running a
program in its own process group so nothing it starts outlives the test.

A script imports it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from htest import Cases, Failure, check, equal, run
and declares its cases with CASES = Cases(), case = CASES, @case."""
import os
import signal
import subprocess


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
