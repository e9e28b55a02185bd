"""The web console: its files served with their security headers, and the whole of it in a
real browser (console_browser.cjs: Debian's chromium, headless, driven by puppeteer-core)
against a real mqrd over https with two users: admin (manage) and watcher (browse only);
and MQTT.js's browser bundle over wss:// in the same browser.

usage: test_console.py MQRD MQR"""

import os
import re
import ssl
import subprocess
import sys
import tempfile
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, run_mqr, self_signed  # noqa: E402

MQRD, MQR = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
NPM = os.path.join(HERE, "..", "..", ".deps", "npm", "node_modules")
DIR = tempfile.mkdtemp(prefix="mqr-console-")

CONFIG = """
listeners:
  - {name: shared, host: 127.0.0.1, port: 0, protocols: [mqr]}
  - {name: webs, host: 127.0.0.1, port: 0, protocols: [http, mqtt], tls: {cert: CERT, key: KEY}}
security:
  users-file: USERS
  allow-anonymous: false
  security-settings:
    '#': {send: [admin], consume: [admin], browse: [admin, watcher], manage: [admin], create-address: [admin],
          create-non-durable-queue: [admin], create-durable-queue: [admin]}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
addresses:
  orders: {anycast: [orders]}
"""


def path(name):
    return os.path.join(DIR, name)


class Console(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        self_signed(DIR)
        for user, roles, pw in (("admin", "admin", "adminpw"), ("watcher", "watcher", "watchpw")):
            run_mqr(MQR, "user", "add", "--users-file", path("users"), user, "--roles", roles, "--password", pw)
        cls.b = Mqrd(MQRD, CONFIG.replace("CERT", path("cert.pem")).replace("KEY", path("key.pem"))
                     .replace("USERS", path("users")))
        line = [x for x in cls.b.log_text().split("\n") if "ready on" in x][-1]
        cls.mqr_port = int(re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1))
        cls.https = int(re.search(r"(?:https|tls)://127\.0\.0\.1:(\d+)", line).group(1))

    @classmethod
    def tearDownClass(cls):
        cls.b.stop_clean(DIR)

    def test_files_and_their_headers(self):
        ctx = ssl.create_default_context(cafile=path("cert.pem"))
        for name, kind in (("/", "text/html"), ("/console.js", "text/javascript"), ("/console.css", "text/css")):
            with urllib.request.urlopen("https://localhost:%d%s" % (self.https, name), context=ctx) as r:
                self.assertEqual(r.status, 200)
                self.assertTrue(r.headers["Content-Type"].startswith(kind))
                self.assertIn("default-src 'self'", r.headers["Content-Security-Policy"])
                self.assertIn("frame-ancestors 'none'", r.headers["Content-Security-Policy"])
                self.assertEqual(r.headers["X-Frame-Options"], "DENY")
                body = r.read()
                self.assertGreater(len(body), 500)
                with open(os.path.join(HERE, "..", "..", "console", "index.html" if name == "/" else name[1:]), "rb") as f:
                    self.assertEqual(body, f.read())  # compiled in as it is

    def test_in_chromium(self):
        env = dict(os.environ, NODE_PATH=NPM)
        r = subprocess.run(["node", os.path.join(HERE, "console_browser.cjs"), str(self.https), str(self.mqr_port), os.path.abspath(MQR)],
                           capture_output=True, text=True, timeout=180, env=env, cwd=os.path.join(NPM, ".."))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.b.log_text()[-2000:])
        self.assertGreaterEqual(r.stdout.count("ok   "), 23, r.stdout)


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
