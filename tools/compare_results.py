#!/usr/bin/env python3
"""Compare two results trees byte for byte, after removing what differs between any two runs of
the same code: wall-clock "seconds" in gradient-method costs and a PDF's CreationDate.

    python tools/compare_results.py BEFORE/results AFTER/results

Used to show that a refactoring changes no output (docs/library.md): prints each file that differs,
the files only one tree has, and the counts. Logs and benchmarks are left out (they hold times).
"""
import json, re, sys
from pathlib import Path

def normal(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".pdf":
        return re.sub(rb"/CreationDate \([^)]*\)", b"", data)
    if path.suffix == ".json":
        def drop(node):
            if isinstance(node, dict):
                return {k: drop(v) for k, v in node.items() if k != "seconds"}
            if isinstance(node, list):
                return [drop(v) for v in node]
            return node
        return json.dumps(drop(json.loads(data)), sort_keys=True).encode()
    return data

before, after = Path(sys.argv[1]), Path(sys.argv[2])
skip = lambda p: {"logs", "benchmarks", ".snakemake"} & set(p.parts)
files_b = {p.relative_to(before) for p in before.rglob("*") if p.is_file() and not skip(p.relative_to(before))}
files_a = {p.relative_to(after) for p in after.rglob("*") if p.is_file() and not skip(p.relative_to(after))}
same = differ = 0
for rel in sorted(files_b & files_a):
    if normal(before / rel) == normal(after / rel):
        same += 1
    else:
        differ += 1
        print("DIFFERS", rel)
print("only before:", sorted(map(str, files_b - files_a)))
print("only after:", sorted(map(str, files_a - files_b)))
print(f"{same} identical, {differ} differ")
