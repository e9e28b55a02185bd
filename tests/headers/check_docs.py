#!/usr/bin/python3
"""Checks that the installed headers are contracts: no internals (names with the private
prefix mqr__ or MQR__, 128-bit integers, SIMD intrinsics), and every exported function
documented: a comment right above its declaration, or above the run of declarations it
belongs to (a group such as the accessors of one struct, under one comment).

usage: check_docs.py HEADER...   prints each problem as FILE:LINE: message; exit 1 if any
"""
import re
import sys

FORBIDDEN = [(re.compile(r"\bmqr__\w+|\bMQR__\w+"), "a private name"),
             (re.compile(r"__uint128_t|__int128"), "a 128-bit integer"),
             (re.compile(r"\b_mm_\w+|__m128\w*|emmintrin\.h|immintrin\.h|arm_neon\.h"), "a SIMD intrinsic")]


def check(path):
    problems = []
    lines = open(path).read().split("\n")
    in_comment = False
    for i, line in enumerate(lines, 1):
        code = re.sub(r"/\*.*?\*/", "", line)
        if in_comment:
            if "*/" in line:
                in_comment = False
                code = line.split("*/", 1)[1]
            else:
                continue
        if "/*" in code:
            in_comment = True
            code = code.split("/*", 1)[0]
        for rx, what in FORBIDDEN:
            m = rx.search(code)
            if m:
                problems.append(f"{path}:{i}: {what} in an installed header: {m.group(0)}")
    # Every MQR_EXTERN declaration: walk up over its own continuation lines and over other
    # declarations of its group to the first line that is not code of a declaration.
    starts = [i for i, l in enumerate(lines) if l.startswith("MQR_EXTERN")]
    for i in starts:
        j = i - 1
        while j >= 0:
            t = lines[j].strip()
            if t == "":
                break
            if t.endswith("*/"):
                break
            j -= 1
        name = re.search(r"(\w+)\s*\(", lines[i])
        name = name.group(1) if name else lines[i]
        if j < 0 or not lines[j].strip().endswith("*/"):
            problems.append(f"{path}:{i + 1}: {name} has no documentation comment above it")
    return problems


def main(argv):
    problems = []
    for p in argv[1:]:
        problems += check(p)
    for p in problems:
        print(p)
    print(f"headers: {len(argv) - 1} checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
