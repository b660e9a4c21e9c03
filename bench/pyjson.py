"""pyjson.py - the Python benchmark workload: builds a deterministic document of
nested dicts, lists, strings and numbers and round-trips it through json.dumps
and json.loads ROUNDS times. Run with PYTHONMALLOC=malloc so that every object
goes through malloc and the tracers see it. Usage: python3 pyjson.py [ROUNDS]"""
import json
import random
import sys


def make_document(rng, n):
    return [
        {
            "id": i,
            "name": "item-%d-%08x" % (i, rng.getrandbits(32)),
            "score": rng.random() * 1000,
            "tags": ["t%d" % rng.randrange(100) for _ in range(rng.randrange(1, 8))],
            "nested": {"a": rng.randrange(1 << 30), "b": [rng.random() for _ in range(4)]},
        }
        for i in range(n)
    ]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rng = random.Random(42)
    doc = make_document(rng, 5000)
    total = 0
    for _ in range(rounds):
        text = json.dumps(doc)
        back = json.loads(text)
        total += len(text) + len(back)
    # Same value every run: the workload is deterministic.
    print(total)


if __name__ == "__main__":
    main()
