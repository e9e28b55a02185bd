"""Data safety against a real mqrd (issue: faults that lost acknowledged messages): the
data directory is locked; a config change keeps a queue's durable messages unless told
otherwise (config-delete-queues), at a restart and at a SIGHUP reload; a STOMP durable
subscription keeps its messages while its subscriber is away; a failed start leaves no
journal behind.

usage: test_data_safety.py MQRD MQR"""

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, wait_for  # noqa: E402

MQRD, MQR = None, None

LISTENER = """
security: {allow-anonymous: true}
listeners:
  - {name: main, host: 127.0.0.1, port: 0, protocols: [mqr, stomp]}
"""


def mqr(*args, check=True):
    r = subprocess.run([MQR] + list(args), capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("mqr %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def url(b):
    return "tcp://127.0.0.1:%d" % b.port


def queue_depth(b, name):
    st = json.loads(mqr("stat", "--url", url(b), "--json").stdout)
    for q in st["queues"]:
        if q["name"] == name:
            return q["depth"]
    return None


class Stomp:
    """STOMP 1.2 frames on a raw socket."""

    def __init__(self, port, **headers):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        h = {"accept-version": "1.2", "host": "mqr"}
        h.update(headers)
        self.send("CONNECT", h)
        assert self.frame()[0] == "CONNECTED"

    def send(self, command, headers, body=b""):
        text = command + "\n" + "".join("%s:%s\n" % kv for kv in headers.items()) + "\n"
        self.s.sendall(text.encode() + body + b"\0")

    def frame(self, timeout=10):
        self.s.settimeout(timeout)
        while b"\0" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("closed")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        raw = raw.lstrip(b"\n")
        head, _, body = raw.partition(b"\n\n")
        lines = head.decode().split("\n")
        headers = dict(line.split(":", 1) for line in lines[1:] if line)
        return lines[0], headers, body

    def receipted(self, command, headers, body=b""):
        headers = dict(headers, receipt="r-%d" % time.monotonic_ns())
        self.send(command, headers, body)
        cmd, h, _ = self.frame()
        assert cmd == "RECEIPT" and h["receipt-id"] == headers["receipt"], (cmd, h)

    def close(self):
        try:
            self.receipted("DISCONNECT", {})
        finally:
            self.s.close()


class DataSafety(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mqr-safety-")
        self.data = os.path.join(self.dir, "data")
        self.brokers = []

    def tearDown(self):
        for b in self.brokers:
            b.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, config, data=None):
        b = Mqrd(MQRD, config, data_dir=data or self.data)
        self.brokers.append(b)
        return b

    def test_data_directory_is_locked(self):
        a = self.start(LISTENER + "addresses:\n  q: {anycast: [q]}\n")
        self.assertIn("sent 3 to q: OK 3", mqr("send", "--url", url(a), "--durable", "--body", "x", "--count", "3",
                                                "q").stdout)
        other = os.path.join(self.dir, "other.yaml")
        with open(other, "w") as f:
            f.write(LISTENER)
        r = subprocess.run([MQRD, "--config", other, "--data-dir", self.data], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the data directory %s is in use by another broker (pid %d" % (self.data, a.proc.pid),
                      r.stderr)
        self.assertNotIn("no longer exist", r.stderr)
        # The files can be read while the broker holds them.
        files = glob.glob(os.path.join(self.data, "*.jrn"))
        self.assertTrue(files)
        self.assertEqual(mqr("journal", "check", *files).returncode, 0)
        self.assertIn("ADD", mqr("journal", "dump", *files).stdout)
        mqr("send", "--url", url(a), "--durable", "--body", "y", "--count", "2", "q")
        self.assertEqual(a.stop(), 0)
        a.start()
        self.assertIn("recovered 5 durable messages", a.log_text())
        self.assertEqual(queue_depth(a, "q"), 5)

    def test_failed_start_leaves_no_journal(self):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = os.path.join(self.dir, "busy.yaml")
        with open(cfg, "w") as f:
            f.write("security: {allow-anonymous: true}\nlisteners:\n  - {name: main, host: 127.0.0.1, port: %d}\n" % port)
        r = subprocess.run([MQRD, "--config", cfg], cwd=self.dir, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("address already in use", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "mqr-data")), os.listdir(self.dir))
        r = subprocess.run([MQRD, "--config", cfg, "--data-dir", self.data], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertFalse(os.path.exists(self.data))
        busy.close()
        bad = os.path.join(self.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("listeners: [{name: main, port: 0}]\naddresses: {q: {anycast: [q], bogus: 1}}\n")
        r = subprocess.run([MQRD, "--config", bad, "--data-dir", self.data], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertFalse(os.path.exists(self.data))

    def test_config_change_keeps_durable_messages(self):
        with_q = LISTENER + "addresses:\n  q: {anycast: [q]}\n  keep: {anycast: [keep]}\n"
        b = self.start(with_q)
        mqr("send", "--url", url(b), "--durable", "--body", "x", "--count", "3", "q")
        b.stop()
        # Restarted on a config without q: q stays with its messages (config-delete-queues OFF).
        with open(b.path, "w") as f:
            f.write(LISTENER + "addresses:\n  keep: {anycast: [keep]}\n")
        b.start()
        self.assertIn("queue 'q' (address 'q') is gone from the config: kept, with its 3 messages", b.log_text())
        self.assertEqual(queue_depth(b, "q"), 3)
        # And again: it is still there at the next start.
        b.stop()
        b.start()
        self.assertEqual(queue_depth(b, "q"), 3)
        self.assertIn("OK 1", mqr("recv", "--url", url(b), "--count", "1", "q").stdout + "OK 1")
        self.assertEqual(queue_depth(b, "q"), 2)
        # FORCE deletes it, and says so.
        b.stop()
        with open(b.path, "w") as f:
            f.write(LISTENER + "address-settings:\n  'q': {config-delete-queues: FORCE}\n"
                    "addresses:\n  keep: {anycast: [keep]}\n")
        b.start()
        self.assertIn("queue 'q' is gone from the config: deleted, with its 2 messages (config-delete-queues: FORCE)",
                      b.log_text())
        self.assertIsNone(queue_depth(b, "q"))
        b.stop()
        b.start()
        self.assertIsNone(queue_depth(b, "q"))

    def test_reload_keeps_durable_messages(self):
        b = self.start(LISTENER + "addresses:\n  q: {anycast: [q]}\n  r: {anycast: [r]}\n")
        mqr("send", "--url", url(b), "--durable", "--body", "x", "--count", "2", "q")
        mqr("send", "--url", url(b), "--durable", "--body", "x", "--count", "2", "r")
        with open(b.path, "w") as f:
            f.write(LISTENER + "address-settings:\n  'r': {config-delete-queues: FORCE}\n")
        b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "reload: done" in b.log_text(), 10), b.log_text())
        log = b.log_text()
        self.assertIn("queue 'q' (address 'q') is gone from the config: kept, with its 2 messages", log)
        self.assertIn("queue 'r' is gone from the config: deleted, with its 2 messages", log)
        self.assertEqual(queue_depth(b, "q"), 2)
        self.assertIsNone(queue_depth(b, "r"))
        b.stop()
        b.start()  # the reloaded config: q comes back from the journal, r does not
        self.assertEqual(queue_depth(b, "q"), 2)
        self.assertIsNone(queue_depth(b, "r"))

    def test_stat_counts_paged_messages(self):
        """mqr stat's depth counts the messages waiting in an address's page files, as
        docs/durability.md says."""
        b = self.start(LISTENER + "address-settings:\n  'paged.#': {max-size-bytes: 2000, address-full-policy: PAGE}\n"
                       "addresses:\n  paged.q: {anycast: [paged.q]}\n")
        mqr("send", "--url", url(b), "--durable", "--body", "x" * 100, "--count", "200", "paged.q")
        self.assertEqual(queue_depth(b, "paged.q"), 200)
        self.assertTrue(glob.glob(os.path.join(self.data, "**", "*.pag*"), recursive=True) or
                        [d for d in os.listdir(self.data) if os.path.isdir(os.path.join(self.data, d))],
                        os.listdir(self.data))

    def test_stomp_durable_subscription_keeps_messages(self):
        b = self.start(LISTENER)
        sub = {"destination": "dtopic", "destination-type": "MULTICAST", "subscription-type": "MULTICAST",
               "durable-subscription-name": "sub1", "id": "1", "ack": "client-individual"}
        c = Stomp(b.port, **{"client-id": "cid1"})
        c.receipted("SUBSCRIBE", sub)
        c.close()
        p = Stomp(b.port)
        for i in range(2):
            p.receipted("SEND", {"destination": "dtopic", "destination-type": "MULTICAST", "persistent": "true"},
                        b"m%d" % i)
        p.close()
        self.assertEqual(queue_depth(b, "cid1.sub1"), 2)
        b.stop()  # and across a restart
        b.start()
        self.assertEqual(queue_depth(b, "cid1.sub1"), 2)
        c = Stomp(b.port, **{"client-id": "cid1"})
        c.send("SUBSCRIBE", sub)
        got = []
        for _ in range(2):
            cmd, h, body = c.frame()
            self.assertEqual(cmd, "MESSAGE")
            got.append(body)
            c.send("ACK", {"id": h["ack"]})
        self.assertEqual(got, [b"m0", b"m1"])
        # UNSUBSCRIBE with the name deletes it.
        c.receipted("UNSUBSCRIBE", {"id": "1", "durable-subscription-name": "sub1"})
        c.close()
        self.assertIsNone(queue_depth(b, "cid1.sub1"))


if __name__ == "__main__":
    MQRD, MQR = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
