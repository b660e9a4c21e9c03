#!/usr/bin/env python3
"""'heaptrail analyze' on a recorded program: tests/programs/cxx_new allocates
through operator new in its forms from one function each, so after the default
culling every allocation belongs to the function that called new, with the
counts and sizes the program documents.

usage: test_analyze_recorded.py HEAPTRAIL CXX_NEW
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HEAPTRAIL, PROG = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import SoftChecks  # noqa: E402

CHECKS = SoftChecks()
check = CHECKS.check


def analyze(trace, *args):
    p = subprocess.run([HEAPTRAIL, "analyze", trace, *args, "--format", "json"],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"analyze {args}: exit {p.returncode}, {p.stderr!r}")
    return json.loads(p.stdout) if p.returncode == 0 else {"totals": {}, "items": []}


tmp = tempfile.mkdtemp(prefix="ht-test-analyze-rec-")
try:
    trace = os.path.join(tmp, "cxx.htr")
    p = subprocess.run([HEAPTRAIL, "record", "-o", trace, "--", PROG], capture_output=True, text=True)
    check(p.returncode == 0 and os.path.exists(trace), f"record: exit {p.returncode}, {p.stderr!r}")
    if os.path.exists(trace):
        d = analyze(trace, "-frames", "stc")
        frames = {i["frame"]: i for i in d["items"]}
        want = {  # frame: total count, total bytes, outstanding count, outstanding bytes
            "cxx_new!make_objects()": (4, 96, 0, 0),
            "cxx_new!make_arrays()": (3, 999, 0, 0),
            "cxx_new!make_aligned()": (2, 384, 0, 0),
            "cxx_new!make_nothrow()": (1, 24, 0, 0),
            "cxx_new!make_leak()": (2, 48, 2, 48),
        }
        for name, w in want.items():
            i = frames.get(name)
            got = i and (i["total_count"], i["total_bytes"], i["outstanding_count"],
                         i["outstanding_bytes"])
            check(got == w, f"{name}: {got}, want {w}")
        check(not any("operator new" in f for f in frames), f"operator new culled: {list(frames)}")
        d = analyze(trace, "-stacks", "-requireFrames", "make_leak")
        check((d["totals"]["alloc_count"], d["totals"]["outstanding_bytes"]) == (2, 48),
              f"require make_leak: {d['totals']}")
        check(d["items"] and d["items"][0]["stack"][:2] == ["cxx_new!make_leak()", "cxx_new!main"],
              f"make_leak stack {d['items'][:1]}")
        d = analyze(trace, "-frames", "-cullFrames", "cxx_new!make_*", "-requireFrames", "cxx_new!make_*")
        # make_failed's stack stops at the exception allocation; the rest is main's.
        check([(i["frame"], i["total_count"]) for i in d["items"][:1]] == [("cxx_new!main", 12)]
              and d["totals"]["alloc_count"] == 13, f"cull make_*: {d['items']}")
finally:
    shutil.rmtree(tmp)

sys.exit(CHECKS.done())
