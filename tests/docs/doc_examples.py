#!/usr/bin/python3
"""The examples in the docs, built and run by the tests.

An example is a ```c block whose first line is `/* example: NAME */`; the ```text block
after it is the output it must print.

An example whose doc also has a ```yaml block before it is run against a real mqrd: the
check starts MQRD on that config (its listener on port 0 of 127.0.0.1), passes the URL
as the program's argument, and stops mqrd by its PID afterwards.

usage: doc_examples.py extract DOC OUTDIR     writes OUTDIR/NAME.c, prints the names (;-separated)
       doc_examples.py check DOC NAME PROGRAM [MQRD]
                                              runs PROGRAM, compares its stdout with the text
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def examples(doc):
    text = open(doc).read()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    out = {}
    for i, (lang, body) in enumerate(blocks):
        m = re.match(r"/\* example: (\w+) \*/", body)
        if lang != "c" or not m:
            continue
        expect = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None
        config = blocks[i - 1][1] if i > 0 and blocks[i - 1][0] == "yaml" else None
        out[m.group(1)] = (body, expect, config)
    return out


def start_mqrd(mqrd, config, tmp):
    """mqrd on config in tmp; returns (process, url) once it listens."""
    path = os.path.join(tmp, "mqr.yaml")
    with open(path, "w") as f:
        f.write(config)
    log = open(os.path.join(tmp, "mqrd.log"), "w+")
    p = subprocess.Popen([mqrd, "--config", path], stdout=log, stderr=subprocess.STDOUT)
    end = time.time() + 20
    while time.time() < end:
        log.seek(0)
        m = re.search(r"on 127\.0\.0\.1:(\d+)", log.read())
        if m:
            return p, "tcp://127.0.0.1:" + m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    log.seek(0)
    raise SystemExit("mqrd did not start listening:\n" + log.read())


def main(argv):
    if len(argv) == 4 and argv[1] == "extract":
        ex = examples(argv[2])
        os.makedirs(argv[3], exist_ok=True)
        for name, (body, _, _) in ex.items():
            path = os.path.join(argv[3], name + ".c")
            old = open(path).read() if os.path.exists(path) else None
            if old != body:  # unchanged files keep their time: no rebuild
                with open(path, "w") as f:
                    f.write(body)
        sys.stdout.write(";".join(ex))
        return 0
    if len(argv) in (5, 6) and argv[1] == "check":
        body, expect, config = examples(argv[2])[argv[3]]
        args, broker = [argv[4]], None
        tmp = tempfile.mkdtemp()
        try:
            if config is not None:
                if len(argv) != 6:
                    raise SystemExit("%s runs against mqrd: give its path" % argv[3])
                broker, url = start_mqrd(argv[5], config, tmp)
                args.append(url)
            p = subprocess.run(args, capture_output=True, text=True, timeout=60)
        finally:
            if broker is not None:
                broker.send_signal(signal.SIGTERM)
                broker.wait(timeout=20)
            subprocess.run(["rm", "-rf", tmp])
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
