#!/usr/bin/env python3
"""End-to-end tests of 'heaptrail analyze' on the fixture traces (fixture.c):
option spellings, modes, filters, culling, output formats, the -top and
10,000-item messages, and one clear error line with a non-zero exit for each
kind of bad input.

usage: test_analyze_cli.py HEAPTRAIL MKFIXTURE
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

HEAPTRAIL, MKFIXTURE = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from htest import SoftChecks  # noqa: E402

CHECKS = SoftChecks()
check = CHECKS.check


def run(*args):
    p = subprocess.run([HEAPTRAIL, "analyze", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def js(*args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"{args}: exit {rc}, stderr {err!r}")
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        check(False, f"{args}: not JSON: {out[:200]!r}")
        return {"totals": {}, "items": []}


def totals(*args):
    t = js(*args)["totals"]
    return (t.get("alloc_count"), t.get("alloc_bytes"), t.get("realloc_count"),
            t.get("outstanding_count"), t.get("outstanding_bytes"))


def metrics(item):
    return (item["outstanding_bytes"], item["outstanding_count"], item["total_bytes"],
            item["total_count"], item["realloc_count"])


def fails(args, message, what):
    """The command exits non-zero with exactly one error line containing message."""
    rc, out, err = run(*args)
    lines = [l for l in err.splitlines() if l]
    check(rc != 0, f"{what}: exit status {rc}")
    check(len(lines) == 1 and lines[0].startswith("heaptrail: error: ") and message in lines[0],
          f"{what}: stderr {err!r}, want one line with {message!r}")


tmp = tempfile.mkdtemp(prefix="ht-test-analyze-")
try:
    paths = {}
    for name in ("basic", "nosym", "ties", "many", "inline"):
        paths[name] = os.path.join(tmp, name + ".htr")
        subprocess.run([MKFIXTURE, paths[name], name], check=True)
    basic = paths["basic"]
    ALL = (13, 5898, 2, 8, 5688)

    # No mode is -stacks so, as in xperf: the same output, text and JSON.
    d = js(basic)
    check(d["mode"] == "stacks" and d["sort"] == "so", "default mode is -stacks so")
    check(d == js(basic, "-stacks", "so"), "no mode = -stacks so (json)")
    check(run(basic) == run(basic, "-stacks", "so"), "no mode = -stacks so (text)")
    # xperf's spelling: -i FILE -a heap, and -o OUT (never over a file without --force).
    out = os.path.join(tmp, "xperf.txt")
    rc, o1, _ = run("-i", basic, "-a", "heap", "-stacks", "so", "-o", out)
    check(rc == 0 and o1 == "" and open(out).read() == run(basic)[1], "-i FILE -a heap -o OUT")
    fails(["-i", basic, "-a", "heap", "-o", out], "use --force", "-o over a file")
    rc, _, _ = run("-i", basic, "-a", "heap", "-o", out, "--force", "--summary")
    check(rc == 0 and open(out).read() == run(basic, "--summary")[1], "-o --force replaces")
    fails([basic, "-a", "cpu"], "unknown action 'cpu'", "an action other than heap")
    fails([basic, "--sumary"], "did you mean '--summary'?", "a misspelt option")
    fails([basic, "-stcks"], "did you mean '-stacks'?", "a misspelt xperf option")
    fails([basic, "--summary", "-frames"], "--summary", "--summary with a mode")
    # --print-default-cull is a -cullLists file: culling with it equals the default.
    rc, cull, _ = run("--print-default-cull")
    check(rc == 0 and "\nmalloc\n" in cull and "\nlibheaptrail*!\n" in cull, "default cull list")
    cf = os.path.join(tmp, "cull.txt")
    with open(cf, "w") as f:
        f.write(cull)
    check(js(basic, "--no-default-cull", "-cullLists", cf) == js(basic), "the printed list culls as the default")
    sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "cullFuncs.txt")
    rc, _, err = run(basic, "-cullLists", sample)
    check(rc == 0 and err == "", f"examples/cullFuncs.txt is a valid cull list: {err!r}")

    # --summary: TOTAL and one row per process and heap handle.
    d = js(basic, "--summary")
    check(d["mode"] == "handles", "--summary mode is handles")
    check(totals(basic) == ALL, "totals of basic")
    rows = [(i["pid"], i["exe"], i["handle"]) + metrics(i) for i in d["items"]]
    check(rows == [(100, "/home/u/app", 0, 1542, 6, 1736, 10, 2),
                   (100, "/home/u/app", 0xabc, 50, 1, 50, 1, 0),
                   (200, "/home/u/worker", 0, 4096, 1, 4112, 2, 0)], f"handle rows {rows}")
    rc, out, _ = run(basic, "--summary")
    lines = out.splitlines()
    check(rc == 0 and "Alloc#" in lines[0] and "Out KiB" in lines[0] and "Handle" in lines[0],
          "handle header")
    check(lines[1].split() == ["13", "5.8", "8", "5.6", "2", "TOTAL"], f"TOTAL row {lines[1]!r}")
    check(lines[3].split()[-3:] == ["0xabc", "100", "/home/u/app"], f"handle row {lines[3]!r}")

    # Modes, sort keys and their spellings.
    def first_stack(*args):
        items = js(basic, *args)["items"]
        return items[0]["stack"] if items else None
    make_node = ["app!make_node", "app!main"]
    check(first_stack("-stacks") == make_node, "-stacks")
    check(first_stack("--stacks", "src") == ["app!grow_buffer", "app!main"], "--stacks src")
    check(first_stack("--stacks=src") == ["app!grow_buffer", "app!main"], "--stacks=src")
    check(first_stack("-stacks", "SRC") == ["app!grow_buffer", "app!main"], "-stacks SRC")
    check(first_stack("src") == ["app!grow_buffer", "app!main"], "a sort key alone")
    check(first_stack("-src") == ["app!grow_buffer", "app!main"], "-src alone")
    d = js("-stacks", "stc", basic)
    check(d["sort"] == "stc" and [i["stack"] for i in d["items"][:2]] ==
          [make_node, ["app!grow_buffer", "app!main"]], "key before the file")
    d = js(basic, "-stacks", "soc")
    check([metrics(i)[1] for i in d["items"]] == [4, 1, 1, 1, 1, 0], "soc order")
    check(d["items"][5]["stack"] == ["libfoo.so!0x1f30", "app!load_config", "app!main"],
          "frames without symbols")
    check(d["items"][4]["stack"] == ["libc.so.6!malloc"], "whole stack culled keeps the bottom")
    check(d["items"][3]["stack"] == [], "no stack is an empty list")
    d = js(basic, "-frames")
    check([i["frame"] for i in d["items"]] == [
        "app!make_node", "app!Parser::parse(char const*)", "app!grow_buffer", "[no stack]",
        "libc.so.6!malloc", "libfoo.so!0x1f30"], "frames")
    check(metrics(d["items"][0]) == (4646, 4, 4746, 5, 0), "frame metrics")
    for opt in ("-images", "-image", "--images", "--image=so"):
        d = js(basic, opt)
        check([i["image"] for i in d["items"]] == ["app", "[no stack]", "libc.so.6", "libfoo.so"],
              f"{opt}")
    check(metrics(js(basic, "-images")["items"][0]) == (5676, 6, 5822, 10, 2), "image metrics")
    d = js(paths["ties"], "-frames", "so")
    check([i["frame"] for i in d["items"]] == ["app!d", "app!a", "app!b", "app!c"],
          "ties: then total size, then key text")

    # Filters.
    check(totals(basic, "-pid", "200") == (2, 4112, 0, 1, 4096), "-pid 200")
    check(totals(basic, "--pid=100,200") == ALL, "--pid=100,200")
    check(totals(basic, "-pid", "100", "-pid", "200") == ALL, "-pid twice")
    check(totals(basic, "-pid", "100") == (11, 1786, 2, 7, 1592), "-pid 100")
    rc, out, err = run(basic, "-pid", "999")
    check(rc == 0 and "no process with pid 999" in err, "warning for an unknown pid")
    for rng in (("20", "60"), ("20us", "60us"), ("0.02ms", "0.06ms"), ("20000ns", "60000ns")):
        check(totals(basic, "-range", *rng) == (3, 1264, 0, 3, 1264), f"-range {rng}")
    check(totals(basic, "--range=20,60") == (3, 1264, 0, 3, 1264), "--range=20,60")
    check(totals(basic, "-range", "20", "60.001") == (3, 1264, 0, 2, 1200), "free inside the range")
    check(totals(basic, "-range", "10", "20") == (1, 100, 0, 1, 100), "range start inclusive")
    check(totals(basic, "-range", "10.001", "20") == (0, 0, 0, 0, 0), "range end exclusive")
    check(totals(basic, "-lifetime", "10", "20") == (3, 46, 1, 0, 0), "-lifetime 10 20")
    check(totals(basic, "--lifetime", "20us", "20.001us") == (1, 64, 0, 0, 0), "lifetime bounds")
    check(totals(basic, "-lifetime", "70", "80.001") == (2, 57, 0, 2, 57),
          "unfreed blocks live to the end")
    check(totals(basic, "-size", "16", "64") == (4, 116, 2, 2, 80), "-size 16 64")
    check(totals(basic, "-size", "16", "65") == (5, 180, 2, 2, 80), "-size upper bound")
    check(totals(basic, "-requireFrames", "libc.so.6!malloc") == (7, 4815, 0, 5, 4651),
          "require before cull")
    check(totals(basic, "--require-frames", "APP!LOAD_CONFIG", "parser::*") == (3, 1080, 0, 1, 1000),
          "require, several frames")

    # Culling.
    def first_frame(*args):
        items = js(basic, "-frames", *args)["items"]
        return items[0]["frame"] if items else None
    check(first_frame("-cullFrames", "APP!MAKE_NODE") == "app!main", "-cullFrames module!symbol")
    check(first_frame("--cull-frames", "Make_Node") == "app!main", "--cull-frames symbol")
    check(first_frame("-cullFrames", "App!") == "app!main", "-cullFrames module!")
    check(first_frame("-cullFrames", "/home/u/APP!make*") == "app!main", "full path and prefix")
    check(first_frame("--no-default-cull") == "libheaptrail.so!malloc", "--no-default-cull")
    cull = os.path.join(tmp, "cull.txt")
    with open(cull, "w") as f:
        f.write("# my wrappers\n\n   \napp!make_node\n# app!main\n")
    check(first_frame("-cullLists", cull) == "app!main", "-cullLists with comments")
    d = js(basic, "-frames", "-cullLists", cull, "-cullFrames", "app!main")
    check([i["frame"] for i in d["items"]][:1] == ["app!main"], "cull lists and frames together")
    d = js("-frames", "-cullFrames", "app!make_node", basic)
    check(d["items"][0]["frame"] == "app!main", "a list before the file")

    # Symbols.
    d = js(basic, "-stacks", "--no-symbols")
    check(d["symbols"] is False and d["items"][0]["stack"] == ["app!0x1000", "app!0x1200"],
          "--no-symbols")
    check(len(d["items"]) == 7, "--no-symbols keeps call sites apart")
    d = js(paths["nosym"], "-frames")
    check(d["symbols"] is False and d["items"][0]["frame"] == "libc.so.6!0x200", "trace without symbols")
    rc, out, err = run(paths["nosym"], "-frames", "-symbols")
    check(rc == 0 and "has no symbols" in err, "-symbols on a trace without symbols warns")

    # Output shaping.
    d = js(basic, "-stacks", "-top", "2")
    check(len(d["items"]) == 2 and d["items_total"] == 6, "-top 2 in JSON")
    rc, out, err = run(basic, "-stacks", "--top=2")
    check("TOP 2 STACKS BY OUTSTANDING SIZE (2 of 6 shown)" in out, "-top cut message")
    check(out.count("\nSTACK ") == 2, "-top 2 shows two stacks")
    check("Outstanding count:            5" in out.split("TOP 2")[1].split("STACK 1")[0],
          "TOP block sums the shown items")
    rc, out, err = run(paths["many"], "-stacks")
    check("showing the first 10000 of 10005 stacks; use -top N to show more" in err,
          f"10,000 limit message: {err!r}")
    check(out.count("\nSTACK ") == 10000, "10,000 items shown")
    d = js(basic, "-stacks", "-totals")
    check("items" not in d and d["totals"]["alloc_count"] == 13, "-totals in JSON")
    rc, out, err = run(basic, "-stacks", "-totals")
    check(out.startswith("GLOBAL ALLOCATIONS") and "TOP" not in out, "-totals in text")
    rc, out, err = run(basic, "-stacks")
    check("GLOBAL ALLOCATIONS\n    Alloc count:                 13\n" in out, "GLOBAL block")
    check("STACK 1\n    Out# 4, Out KiB 4.5, Alloc# 5, Alloc KiB 4.6, Realloc# 0\n"
          "        app!make_node  app.c:12\n        app!main  app.c:30\n" in out, "stack block")
    rc, out, err = run(paths["inline"], "-stacks")
    check("        app!helper  helper.h:3  (inlined)\n        app!caller  app.c:20\n"
          "        app!main  app.c:30\n" in out, f"inlined frames in text: {out!r}")
    rc, out, err = run(basic, "-totals", "--summary")
    check(rc == 0 and len(out.splitlines()) == 2 and out.splitlines()[1].split()[-1] == "TOTAL",
          f"-totals --summary: {out!r}")
    rc, out, err = run(basic, "-stacks", "so", "--format=csv")
    lines = out.splitlines()
    check(lines[0] == "outstanding_bytes,outstanding_count,total_bytes,total_count,realloc_count,stack",
          "CSV header")
    check(lines[1] == "4646,4,4746,5,0,app!make_node <- app!main", f"CSV row {lines[1]!r}")
    rc, out, err = run(basic, "-frames", "--format", "csv")
    check(out.splitlines()[2] == '1000,1,1016,2,0,app!Parser::parse(char const*)', "CSV frames")
    rc, out, err = run(basic, "--format", "csv", "-totals")
    check(out == "alloc_count,alloc_bytes,realloc_count,outstanding_count,outstanding_bytes\n"
                 "13,5898,2,8,5688\n", "CSV totals")
    rc, out, err = run("--help")
    check(rc == 0 and "then total size, then the key text" in out and "range's end" in out, "--help")

    # Golden outputs: the whole text, CSV and JSON of a few commands, byte for byte.
    # After a deliberate change of layout, regenerate them with the commands below
    # (mkfixture basic.htr basic; heaptrail analyze basic.htr ARGS > golden/FILE).
    golden_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
    for name, args in (("handles.txt", ["--summary"]), ("stacks.txt", ["-stacks"]),
                       ("frames_soc.csv", ["-frames", "soc", "--format", "csv"]),
                       ("images.json", ["-images", "--format", "json"]),
                       ("stacks_nosym_top3.json", ["-stacks", "--no-symbols", "-top", "3",
                                                   "--format", "json"])):
        with open(os.path.join(golden_dir, name)) as f:
            want = f.read()
        rc, out, err = run(basic, *args)
        check(rc == 0 and out == want, f"golden {name}: got {out!r}")

    # Damaged traces: cut anywhere or with a byte flipped, analyze never crashes;
    # it fails with one error line, or reads what is whole and counts no more.
    # 268 runs, four at a time: one after the other, each waited for the
    # scheduler a few times, and under ASan at a load of 40-60 the case took
    # its 300 s for 5 s of CPU.
    with open(basic, "rb") as f:
        data = f.read()
    cases = [data[:n] for n in range(0, len(data), 7)]
    cases += [data[:n] + bytes([data[n] ^ 0x5a]) + data[n + 1:] for n in range(0, len(data), 13)]

    def run_damaged(k):
        damaged = os.path.join(tmp, "damaged-%d.htr" % k)
        with open(damaged, "wb") as f:
            f.write(cases[k])
        return run(damaged, "-stacks", "--format", "json")

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run_damaged, range(len(cases))))
    for k, (blob, (rc, out, err)) in enumerate(zip(cases, results)):
        ok = rc in (0, 2)
        if rc == 0:
            try:
                t = json.loads(out)["totals"]
                ok = t["alloc_count"] <= 13 or len(blob) == len(data)
            except (ValueError, KeyError):
                ok = False
        else:
            ok = ok and len(err.splitlines()) == 1 and err.startswith("heaptrail: error: ")
        check(ok, f"damaged trace {k} ({len(blob)} bytes): exit {rc}, {err!r}")

    # Bad input: one clear line, non-zero exit.
    fails([basic, "--bogus"], "unknown option '--bogus'", "unknown option")
    fails([basic, "-bogus"], "unknown option '-bogus'", "unknown one-dash option")
    fails([basic, "-stacks", "xx"], "unknown sort key 'xx'", "bad sort key")
    fails([basic, "--frames=sox"], "unknown sort key 'sox'", "bad sort key, inline")
    fails([basic, "-range", "5ms", "2ms"], "invalid range '5ms 2ms': T2 must be after T1", "T2 < T1")
    fails([basic, "-range", "5", "5"], "T2 must be after T1", "T2 == T1")
    fails([basic, "-range", "5"], "needs two values", "one range value")
    fails([basic, "-range", "1x", "2"], "invalid time '1x'", "bad time")
    fails([basic, "-lifetime", "9", "3"], "L2 must be greater than L1", "bad lifetime")
    fails([basic, "-size", "64", "16"], "S2 must be greater than S1", "bad size range")
    fails([basic, "-top", "0"], "invalid count '0'", "top 0")
    fails([basic, "--format", "xml"], "unknown format 'xml'", "bad format")
    fails([basic, "-pid", "abc"], "invalid pid 'abc'", "bad pid")
    fails([basic, "-stacks", "-frames"], "choose one of -stacks, -frames and -images", "two modes")
    fails([os.path.join(tmp, "nope.htr")], "cannot open '" + os.path.join(tmp, "nope.htr") +
          "': No such file or directory", "missing file")
    fails([cull], f"'{cull}' is not a heaptrail trace", "not a trace")
    fails([], "no trace given", "no file")
    fails([basic, "-cullLists", os.path.join(tmp, "none.txt")],
          "cannot read cull list '" + os.path.join(tmp, "none.txt") + "': No such file or directory",
          "missing cull list")
    fails([basic, "-cullLists", tmp], f"cannot read cull list '{tmp}': Is a directory",
          "cull list is a directory")
    if os.geteuid() != 0:
        locked = os.path.join(tmp, "locked.txt")
        with open(locked, "w") as f:
            f.write("app!main\n")
        os.chmod(locked, 0)
        fails([basic, "-cullLists", locked], f"cannot read cull list '{locked}': Permission denied",
              "unreadable cull list")
    fails([basic, "-cullFrames", "!"], "invalid frame '!'", "bad frame")
finally:
    shutil.rmtree(tmp)

sys.exit(CHECKS.done())
