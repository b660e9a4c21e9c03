"""gen_json.py - writes the jq benchmark input: a deterministic JSON array of
records, about TARGET_MB megabytes. Usage: python3 gen_json.py OUT [TARGET_MB]"""
import json
import random
import sys


def main():
    out = sys.argv[1]
    target = int(float(sys.argv[2]) * 1024 * 1024) if len(sys.argv) > 2 else 25 * 1024 * 1024
    rng = random.Random(7)
    written = 0
    with open(out, "w") as f:
        f.write("[")
        i = 0
        while written < target:
            rec = {
                "id": i,
                "name": "user%06d" % rng.randrange(1000000),
                "score": rng.randrange(1000),
                "tags": ["k%d" % rng.randrange(50) for _ in range(rng.randrange(1, 6))],
                "geo": {"lat": round(rng.uniform(-90, 90), 5), "lon": round(rng.uniform(-180, 180), 5)},
            }
            text = ("," if i else "") + json.dumps(rec, separators=(",", ":"))
            f.write(text)
            written += len(text)
            i += 1
        f.write("]\n")


if __name__ == "__main__":
    main()
