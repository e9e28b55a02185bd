#!/usr/bin/python3
"""The examples in the docs, built and run by the tests.

An example is a ```c block whose first line is `/* example: NAME */`; the ```text block
after it is the output it must print.

usage: doc_examples.py extract DOC OUTDIR     writes OUTDIR/NAME.c, prints the names (;-separated)
       doc_examples.py check DOC NAME PROGRAM runs PROGRAM, compares its stdout with the text
"""
import re
import subprocess
import sys


def examples(doc):
    text = open(doc).read()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    out = {}
    for i, (lang, body) in enumerate(blocks):
        m = re.match(r"/\* example: (\w+) \*/", body)
        if lang != "c" or not m:
            continue
        expect = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None
        out[m.group(1)] = (body, expect)
    return out


def main(argv):
    if len(argv) == 4 and argv[1] == "extract":
        ex = examples(argv[2])
        import os
        os.makedirs(argv[3], exist_ok=True)
        for name, (body, _) in ex.items():
            path = os.path.join(argv[3], name + ".c")
            old = open(path).read() if os.path.exists(path) else None
            if old != body:  # unchanged files keep their time: no rebuild
                with open(path, "w") as f:
                    f.write(body)
        sys.stdout.write(";".join(ex))
        return 0
    if len(argv) == 5 and argv[1] == "check":
        body, expect = examples(argv[2])[argv[3]]
        p = subprocess.run([argv[4]], capture_output=True, text=True)
        if p.returncode != 0:
            print("%s exited %d: %s" % (argv[3], p.returncode, p.stderr))
            return 1
        if expect is not None and p.stdout != expect:
            print("%s printed:\n%s\nthe doc says:\n%s" % (argv[3], p.stdout, expect))
            return 1
        print("ok   %s" % argv[3])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
