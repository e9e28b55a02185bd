"""The layers of the broker include only downward (docs/architecture.md):

  heads/X/  its own files, the connection layer (net/net.h) and what it includes
            (broker/core.h), common/ helpers and the public headers; never broker_int.h
            nor another head
  net/      its own files, broker/core.h, common/ and the public headers; no head
  broker/   the core: never net/ nor heads/
  core.h    only the public headers and the core's own helpers it hands on

usage: check_layers.py SOURCE_DIR"""

import os
import re
import sys

root = os.path.abspath(sys.argv[1])
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
bad = []
checked = 0


def files(folder):
    for d, _, names in os.walk(os.path.join(root, folder)):
        for n in names:
            if n.endswith((".c", ".h")):
                yield os.path.join(d, n)


def resolved(path, inc):
    """The repository path an include names (relative to its file, or include/)."""
    here = os.path.normpath(os.path.join(os.path.dirname(path), inc))
    if os.path.exists(here):
        return os.path.relpath(here, root)
    return os.path.join("include", inc) if inc.startswith("mqr/") else inc


def check(folder, allowed):
    global checked
    for path in files(folder):
        rel = os.path.relpath(path, root)
        for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
            target = resolved(path, inc)
            checked += 1
            if not allowed(rel, target):
                bad.append(f"{rel} includes {target}")


def public_or_common(t):
    return t.startswith("include/mqr/") or t.startswith("common/")


for head in sorted(os.listdir(os.path.join(root, "heads"))):
    if not os.path.isdir(os.path.join(root, "heads", head)):
        continue
    check(f"heads/{head}",
          lambda rel, t, head=head: t.startswith(f"heads/{head}/") or t == "net/net.h" or public_or_common(t))
check("net", lambda rel, t: t.startswith("net/") or t == "broker/core.h" or public_or_common(t))
check("broker", lambda rel, t: not t.startswith(("net/", "heads/")) and
      (rel != "broker/core.h" or t in ("broker/strmap.h",) or t.startswith("include/mqr/")))
for path in files("heads"):  # heads/heads.c: the table, over the connection layer
    rel = os.path.relpath(path, root)
    if rel.count("/") == 1:
        for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
            checked += 1
            if resolved(path, inc) != "net/net.h":
                bad.append(f"{rel} includes {resolved(path, inc)}")

for b in bad:
    print("upward or sideways:", b)
print(f"includes: {checked} checked, {len(bad)} against the layers")
sys.exit(1 if bad or checked == 0 else 0)
