"""Every repository path named in the docs and in the sources' comments exists: a token
such as `broker/send.c`, `docs/config.md` or `tests/clients/mqrd.py` whose first part is
one of the repository's top-level folders must name a file or folder there (a file's
neighbour, `native/conn.c` from broker/, counts too).

usage: check_paths.py SOURCE_DIR"""

import os
import re
import subprocess
import sys

root = os.path.abspath(sys.argv[1])
files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
tops = {f.split("/")[0] for f in files if "/" in f}
known = set(files) | {os.path.dirname(f) for f in files}
for f in files:  # every folder on the way
    parts = f.split("/")
    for i in range(1, len(parts)):
        known.add("/".join(parts[:i]))

BARE = re.compile(r"(?<![\w./-])([A-Za-z0-9_-]+\.c)\b(?![\w/(-])")
basenames = {os.path.basename(f) for f in files}
# Names that are not this repository's files: the NATS C client's name, and the example
# doc_examples.py extracts from docs/embedding.md.
basenames |= {"nats.c", "embedded.c"}
PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]*[A-Za-z0-9_])")
C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
HASH_COMMENT = re.compile(r"#[^\n]*")
SKIP = ("http", "www.", "github.com", "usr/", "etc/", "var/", "tmp/", "dev/", "proc/", "sys/")

bad = []
checked = 0
for f in files:
    ext = os.path.splitext(f)[1]
    if ext not in (".md", ".c", ".h", ".py", ".sh", ".txt", ".cmake", ".yaml") and not f.endswith("CMakeLists.txt"):
        continue
    if f.startswith("tests/data/") or f.startswith("jmh-like-bench/results"):
        continue
    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    comment = C_COMMENT if ext in (".c", ".h") else HASH_COMMENT
    texts = [text] if ext == ".md" else [m.group(0) for m in comment.finditer(text)]
    here = os.path.dirname(f)
    for t in texts:
        for line_text in t.splitlines():
            for m in PATH.finditer(line_text):
                p = m.group(1).rstrip(".")
                if p.startswith(SKIP) or "://" in line_text[max(0, m.start() - 12):m.start() + 3]:
                    continue
                first = p.split("/")[0]
                if first not in tops and not (here and os.path.join(here, p).split("/")[0] in tops and
                                              os.path.join(here, p) in known and first not in ("..",)):
                    continue
                checked += 1
                if p in known or p.rstrip("/") in known:
                    continue
                if here and os.path.normpath(os.path.join(here, p)) in known:
                    continue
                # a pattern or a placeholder (NAME, X, *) is not a path
                if re.search(r"[*{}<>]|/X\b|NAME|\.\.\.", p):
                    continue
                bad.append("%s: %s" % (f, p))

    # A bare source file name (`send.c`) must be the name of some file of the repository.
    for t in texts:
        for m in BARE.finditer(t):
            checked += 1
            if m.group(1) not in basenames:
                bad.append("%s: %s" % (f, m.group(1)))

for b in sorted(set(bad)):
    print("missing:", b)
print("paths: %d checked, %d missing" % (checked, len(set(bad))))
sys.exit(1 if bad else 0)
