"""Runs every example of docs/management-api.md, in order, against a real mqrd with the
embedded default config's listeners (on ephemeral ports): each ```sh block's commands
(curl, with the docs' URL turned into the broker's; mqr, with --url added), and compares
the JSON answer with the ```json block that follows it: every field the docs show must be
in the answer with the value shown (lists element by element); the answer may hold more.

usage: test_api_docs.py MQRD MQR"""

import json
import os
import re
import shlex
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd  # noqa: E402

MQRD, MQR = sys.argv[1], sys.argv[2]
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "management-api.md")

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - {name: main, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp, http]}
  - {name: web, host: 127.0.0.1, port: 0, protocols: [http]}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
"""


def blocks(text):
    """The doc's fenced blocks, in order, as (language, body)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w+)\n(.*?)^```$", text, re.S | re.M)]


def contains(actual, shown, where="answer"):
    """Whether every field shown is in actual with that value: a failure message, or None."""
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return "%s: %r is not an object" % (where, actual)
        for k, v in shown.items():
            if k not in actual:
                return "%s: no field %r in %r" % (where, k, actual)
            why = contains(actual[k], v, "%s.%s" % (where, k))
            if why:
                return why
        return None
    if isinstance(shown, list):
        if not isinstance(actual, list) or len(actual) < len(shown) or (not shown and actual):
            return "%s: %r is not like %r" % (where, actual, shown)
        for i, v in enumerate(shown):
            why = contains(actual[i], v, "%s[%d]" % (where, i))
            if why:
                return why
        return None
    return None if actual == shown else "%s: %r, not %r" % (where, actual, shown)


class ApiDocs(unittest.TestCase):
    def test_every_example(self):
        b = Mqrd(MQRD, CONFIG)
        try:
            line = [x for x in b.log_text().split("\n") if "ready on" in x][-1]
            main = int(re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1))
            web = int(re.search(r"http://127\.0\.0\.1:(\d+)", line).group(1))
            with open(DOC) as f:
                bs = blocks(f.read())
            ran = 0
            for i, (lang, body) in enumerate(bs):
                if lang != "sh":
                    continue
                out = ""
                for cmd in body.strip().split("\n"):
                    args = shlex.split(cmd)
                    if args[0] == "curl":
                        args = [a.replace("http://127.0.0.1:8161", "http://127.0.0.1:%d" % web) for a in args]
                    elif args[0] == "mqr":
                        args = [MQR, args[1], "--url", "tcp://127.0.0.1:%d" % main] + args[2:]
                    else:
                        self.fail("an example runs curl or mqr: %s" % cmd)
                    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
                    self.assertEqual(r.returncode, 0, "%s: %s" % (cmd, r.stderr))
                    out = r.stdout
                    ran += 1
                if i + 1 < len(bs) and bs[i + 1][0] == "json":
                    shown = json.loads(bs[i + 1][1])
                    why = contains(json.loads(out), shown)
                    self.assertIsNone(why, "%s\nanswered: %s" % (body.strip(), out))
            self.assertGreaterEqual(ran, 20)
        finally:
            code = b.stop()
            self.assertEqual(code, 0, b.log_text()[-3000:])


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
