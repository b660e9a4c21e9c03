#!/usr/bin/env python3
"""jemalloc, tcmalloc and mimalloc under heaptrail record (issue 12), through
the command line: linked in (tests/preload/alloc/alloc_ext.cpp) and
LD_PRELOADed under a program that knows nothing of them (tests/programs/pulse,
300 malloc(777)/free pairs). Their own mmaps, made through the PLT from inside
malloc, are events of their own (or, inside a realloc, the allocator's work),
never events lost: `lost` is 0 and every pair is there once."""
import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import Cases, Failure, case_main, check, equal  # noqa: E402

CASES = Cases()
LIBS = {"je": "libjemalloc.so.2", "tc": "libtcmalloc.so.4", "mi": "libmimalloc.so.2"}


class Env:
    def __init__(self, build, src, tmp):
        self.tmp = tmp
        self.ht = os.path.join(build, "bin", "heaptrail")
        self.progs = os.path.join(build, "tests", "preload", "progs")
        self.pulse = os.path.join(build, "tests", "programs", "pulse")

    def record(self, argv, trace, env=None, stdin=b""):
        p = subprocess.run([self.ht, "record", "-q", "-o", trace, "--force", "--"] + argv,
                           input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           cwd=self.tmp, env=env, timeout=120)
        return p.returncode, p.stderr.decode(errors="replace")

    def info(self, trace):
        p = subprocess.run([self.ht, "info", "--format", "json", trace], stdout=subprocess.PIPE,
                           timeout=60, check=True)
        return json.loads(p.stdout)

    def events(self, trace):
        p = subprocess.run([self.ht, "dump", "--format", "json", trace], stdout=subprocess.PIPE,
                           timeout=60, check=True)
        return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


def prog(env, tag):
    path = os.path.join(env.progs, "alloc_" + tag)
    if not os.path.exists(path):
        raise Failure("%s was not built: install the allocator (scripts/deps.sh test)" % path)
    return path


def lib_of(env, tag):
    """The allocator library alloc_TAG links, from ldd."""
    out = subprocess.run(["ldd", prog(env, tag)], stdout=subprocess.PIPE, check=True).stdout.decode()
    for line in out.splitlines():
        if LIBS[tag] in line and "=>" in line:
            return line.split("=>")[1].split()[0]
    raise Failure("alloc_%s does not load %s" % (tag, LIBS[tag]))


@CASES
def linked(env):
    for tag in LIBS:
        trace = os.path.join(env.tmp, tag + ".htr")
        rc, err = env.record([prog(env, tag)], trace)
        equal(rc, 0, "alloc_%s: exit status (%s)" % (tag, err))
        info = env.info(trace)
        equal(info.get("events_lost"), 0, "alloc_%s: events lost" % tag)


@CASES
def preloaded(env):
    # A user preloads the allocator into heaptrail too (LD_PRELOAD=LIB
    # heaptrail record ...). A heaptrail built with ASan cannot take that
    # (its runtime must come first, and its allocator would meet another):
    # there a shell in the traced program puts LIB after the recorder, as
    # record does with an LD_PRELOAD it finds.
    san = b"libasan" in subprocess.run(["ldd", env.ht], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL).stdout
    for tag in LIBS:
        lib = lib_of(env, tag)
        trace = os.path.join(env.tmp, tag + "-pre.htr")
        if san:
            argv = ["sh", "-c", 'LD_PRELOAD="$LD_PRELOAD:$0" exec "$@"', lib, env.pulse]
            rc, err = env.record(argv, trace, stdin=b"aaa")
        else:
            rc, err = env.record([env.pulse], trace, env=dict(os.environ, LD_PRELOAD=lib),
                                 stdin=b"aaa")
        equal(rc, 0, "pulse under LD_PRELOAD=%s: exit status (%s)" % (lib, err))
        equal(env.info(trace).get("events_lost"), 0, "%s preloaded: events lost" % tag)
        evs = env.events(trace)
        allocs = [e for e in evs if e["type"] == "alloc" and e.get("size") == 777]
        equal(len(allocs), 300, "%s preloaded: malloc(777) events" % tag)
        equal({e["func"] for e in allocs}, {"malloc"}, "%s preloaded: their function" % tag)
        addrs = {e["addr"] for e in allocs}
        frees = [e for e in evs if e["type"] == "free" and e["addr"] in addrs]
        check(len(frees) >= 300, "%s preloaded: the pairs' frees: %d" % (tag, len(frees)))
        check(any(e["type"] == "module_load" and e.get("path", "").endswith(LIBS[tag]) for e in evs),
              "%s preloaded: the allocator's module is in the trace" % tag)


@CASES
def preloaded_threads(env):
    # The same with threads (tests/programs/threads: 4 threads, 250
    # allocations each of 100 + 10 * index bytes). A thread's first stack
    # capture asks for its stack's bounds (pthread_getattr_np, which
    # allocates); made inside jemalloc's mmap from inside its malloc, that
    # went back into jemalloc, which deadlocked on its own lock.
    san = b"libasan" in subprocess.run(["ldd", env.ht], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL).stdout
    threads = os.path.join(os.path.dirname(env.pulse), "threads")
    for tag in LIBS:
        lib = lib_of(env, tag)
        trace = os.path.join(env.tmp, tag + "-threads.htr")
        argv = [env.ht, "record", "-q", "-o", trace, "--force", "--"]
        environ = dict(os.environ)
        if san:
            argv += ["sh", "-c", 'LD_PRELOAD="$LD_PRELOAD:$0" exec "$@"', lib, threads]
        else:
            argv += [threads]
            environ["LD_PRELOAD"] = lib
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=env.tmp,
                             env=environ, start_new_session=True)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)  # the program too: its session
            p.wait()
            raise Failure("threads under LD_PRELOAD=%s: no end in 60 s (a deadlock)" % lib)
        equal(p.returncode, 0, "threads under LD_PRELOAD=%s: exit status (%s)" % (lib, err))
        equal(env.info(trace).get("events_lost"), 0, "%s preloaded, threads: events lost" % tag)
        evs = env.events(trace)
        for i in range(4):
            allocs = [e for e in evs if e["type"] == "alloc" and e.get("size") == 100 + 10 * i]
            check(len(allocs) == 250 and {e["func"] for e in allocs} == {"malloc"},
                  "%s preloaded: thread %d's 250 malloc(%d): %d" % (tag, i, 100 + 10 * i, len(allocs)))


def many_keys_attached(env, what, trace, environ=None, opts=(), rounds=b"a", watch=None):
    """tests/programs/many_keys under `record -p` (with opts): one round of
    its threads per byte of rounds, each waited for (no deadlock), then
    record -p is stopped with SIGINT. Returns watch(pid) before and after
    the rounds, when given."""
    prog = os.path.join(os.path.dirname(env.pulse), "many_keys")
    p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environ,
                         start_new_session=True)
    r = None
    seen = []
    try:
        equal(p.stdout.readline(), b"ready\n", "many_keys (%s) starts" % what)
        r = subprocess.Popen([env.ht, "record"] + list(opts) + ["-p", str(p.pid), "-o", trace,
                                                                "--force"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=env.tmp)
        line = r.stderr.readline().decode(errors="replace")
        check(line.startswith("heaptrail: tracing 1 process"), "record -p attached: %r" % line)
        if watch:
            seen.append(watch(p.pid))
        for i, c in enumerate(rounds):
            p.stdin.write(bytes([c]))
            p.stdin.flush()
            got = []
            t = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
            t.start()
            t.join(60)
            equal(got, [b"ok\n"], "many_keys (%s) under record -p: round %d's threads end "
                  "(no deadlock)" % (what, i))
        if watch:
            seen.append(watch(p.pid))
        r.send_signal(signal.SIGINT)
        _, err = r.communicate(timeout=120)
        equal(r.returncode, 0, "record -p (%s): exit status (%s)" % (what, err))
    finally:
        if r and r.poll() is None:
            r.kill()
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    equal(env.info(trace).get("events_lost"), 0, "many_keys (%s) attached: events lost" % what)
    return seen


@CASES
def attached_keys(env):
    # record -p of a program that made 40 pthread keys first (with glibc's
    # allocator, and with jemalloc preloaded): the recorder's key is past
    # the first 32, so marking a thread for its exit cleanup
    # (pthread_setspecific) allocates. That allocation was counted as a
    # signal handler's lost event (one a thread); made inside jemalloc's
    # mmap from inside its malloc, it deadlocked the program for good.
    for tag in ("glibc", "je"):
        environ = dict(os.environ)
        if tag != "glibc":
            environ["LD_PRELOAD"] = lib_of(env, tag)
        trace = os.path.join(env.tmp, tag + "-keys.htr")
        many_keys_attached(env, tag, trace, environ)
        allocs = [e for e in env.events(trace) if e["type"] == "alloc" and e.get("size") == 555]
        equal(len(allocs), 400, "many_keys (%s) attached: its threads' malloc(555)" % tag)


def unwinding_stacks(pid):
    """The recorder's unwinding stacks mapped in pid: a 4 KiB PROT_NONE guard
    right below 128 KiB of anonymous read-write memory (preload/internal.h,
    HT_USTACK_GUARD and HT_USTACK_SIZE); glibc's thread stacks are larger."""
    n, prev = 0, None
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            cur = (lo, hi, fields[1], len(fields) < 6)
            if (prev and prev[1] == lo and prev[1] - prev[0] == 4096 and prev[2] == "---p"
                    and hi - lo == 128 * 1024 and cur[2] == "rw-p" and cur[3]):
                n += 1
            prev = cur
    return n


@CASES
def attached_keys_snapshot(env):
    # record -p --snapshot of a program that made 40 pthread keys, whose
    # threads' first call is mmap: the thread's first stack is taken inside
    # a mapping hook, where marking it for its exit cleanup (an allocating
    # pthread_setspecific) must wait; snapshot mode writes no record for
    # the heap events after it, and the cleanup never came: each thread
    # left its 128 KiB unwinding stack mapped.
    trace = os.path.join(env.tmp, "snap-keys.htr")
    seen = many_keys_attached(env, "snapshot", trace, opts=["--snapshot"], rounds=b"mmm",
                              watch=unwinding_stacks)
    # Joined threads ran their exit cleanup: no unwinding stack of theirs.
    check(len(seen) == 2 and seen[1] == seen[0],
          "unwinding stacks left by 12 joined threads: %s before and after" % seen)


if __name__ == "__main__":
    sys.exit(case_main(CASES, Env, "ht-alloc-"))
