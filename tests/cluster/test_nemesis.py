"""Three mqrd nodes under faults, their histories checked (docs/cluster.md's promise).

Each node is started as a user would, with its own data directory; the nodes reach
one another only through a fault-injecting proxy of the test's (faultproxy.py). Two
producers send numbered messages one at a time to a replicated address with `mqr send
--durable` given every node (the command finds the leader), each recording whether the
broker answered OK; a consumer takes them ten at a time through any node with `mqr
recv`, acknowledging each. Meanwhile the nemesis, in rounds: isolates the leader, cuts a
follower off, delays every link, kills the leader with SIGKILL and starts it again,
pauses it with SIGSTOP and resumes it, fails the leader's disk (EIO) or a follower's
(full: ENOSPC) for a while, through a preloaded library of the test's (diskfault.c), and
restarts that node once its disk works again. Then every fault heals, and the queue is drained
through any node. The checker then holds that:

  - no message answered OK is lost: every one is received;
  - no acknowledgement answered committed is undone: a message of an `mqr recv` that
    exited 0 (its last ack answered, so every one of its acks committed) is never
    received again;
  - nothing is received that was never sent, and each producer's messages come in the
    order it sent them (a message sent again after an in-doubt answer may come twice);
  - a message's delivery counts never go back from one reception to the next;
  - no two nodes led the group in the same term (from their logs);
  - with NEMESIS_FEED=1 (clients go to any node: sends forwarded to the leader, consumers
    on followers fed from it), consumers were served on followers;
  - with the nemesis over, the group serves again.

Bounded in `make test` (NEMESIS_SECONDS, default 30); `make cluster-test` runs it longer.

Usage: test_nemesis.py MQRD MQR LIBDISKFAULT"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "clients"))
from faultproxy import FaultProxy  # noqa: E402
from mqrd import Mqrd, free_port, self_signed  # noqa: E402

MQRD, MQR, DISKFAULT = None, None, None
SECONDS = float(os.environ.get("NEMESIS_SECONDS", "30"))
RAFT_TLS = os.environ.get("NEMESIS_RAFT_TLS") == "1"  # the Raft links over TLS (raft-tls)
# Each node knows its peers' client urls: a send to a follower is forwarded to the leader,
# and a consumer on a follower is fed from it; clients try the nodes in a random order.
FEED = os.environ.get("NEMESIS_FEED") == "1"


def mqr(*args, timeout=60):
    return subprocess.run([MQR] + list(args), capture_output=True, text=True, timeout=timeout)


class Producer(threading.Thread):
    def __init__(self, name, urls, stop):
        super().__init__(daemon=True)
        self.name_, self.urls, self.stop = name, urls, stop
        self.sent = []  # (body, answered OK)

    def run(self):
        seq = 0
        while not self.stop.is_set():
            body = "%s-%06d" % (self.name_, seq)
            r = mqr("send", "--url", self.urls(), "--durable", "--body", body, "--timeout", "5", "orders", timeout=30)
            self.sent.append((body, r.returncode == 0 and "OK 1" in r.stdout))
            seq += 1


COUNTS = []  # (message id, delivery count) of every reception, in order


def received(stdout):
    """mqr recv --json's lines: (message id, body) each; their delivery counts noted."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            m = json.loads(line)
            out.append((m["message_id"], m.get("body", "")))
            COUNTS.append((m["message_id"], m["delivery_count"]))
    return out


class Consumer(threading.Thread):
    """Takes what is there, ten at a time through any node, acknowledging each (mqr recv,
    whose exit status 0 says the broker answered its last acknowledgement: every one of
    the run is committed)."""

    def __init__(self, urls, stop):
        super().__init__(daemon=True)
        self.urls, self.stop = urls, stop
        self.runs = []  # (every ack answered committed, [(message id, body)])

    def run(self):
        while not self.stop.is_set():
            r = mqr("recv", "--url", self.urls(), "--count", "10", "--timeout", "1", "--json", "orders", timeout=30)
            self.runs.append((r.returncode == 0, received(r.stdout)))

    @property
    def got(self):
        return [body for _, msgs in self.runs for _, body in msgs]


class Nemesis(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mqr-nemesis-")
        while True:  # (the proxy's ports are the kernel's choice: one may be a node's, not yet bound)
            real = {i: free_port() for i in (1, 2, 3)}
            self.proxy = FaultProxy(real)
            via = self.proxy.start()
            if not set(via.values()) & set(real.values()):
                break
            self.proxy.stop()
        self.nodes = {}
        tls = ""
        if RAFT_TLS:
            cert, key = self_signed(self.dir)
            tls = "  user: node\n  password: node-pw\n  tls: {ca: %s, cert: %s, key: %s}\n  raft-tls: true\n" % (
                cert, cert, key)
        client = {i: free_port() if FEED else 0 for i in (1, 2, 3)}
        for i in (1, 2, 3):
            peers = ", ".join("{id: %d, address: 127.0.0.1:%d%s}" % (
                k, via[k], ", url: tcp://127.0.0.1:%d" % client[k] if FEED else "") for k in (1, 2, 3) if k != i)
            config = """security: {allow-anonymous: true}
listeners:
  - {name: main, host: 127.0.0.1, port: %d}
persistence: {directory: %s/n%d}
address-settings:
  "orders": {replicated: true}
addresses:
  orders: {anycast: [orders]}
cluster:
  node-id: %d
  bind: 127.0.0.1:%d
  peers: [%s]
  snapshot-threshold: 100000
""" % (client[i], self.dir, i, i, real[i], peers) + tls
            self.nodes[i] = Mqrd(MQRD, config, env=self.disk_env(i))
        self.paused = set()
        self.restarts = []  # (node, exit code) of the restarts after a disk fault
        self.disk_exits = 0  # of those, the nodes that saw their disk fail and exited 1

    def disk_env(self, i):
        """Node i's disk fails while its control file says EIO or ENOSPC (diskfault.c)."""
        asan = os.environ.get("ASAN_OPTIONS", "")
        return {"LD_PRELOAD": DISKFAULT, "MQR_DISKFAULT": os.path.join(self.dir, "disk%d" % i),
                "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}

    def disk(self, i, what):
        with open(os.path.join(self.dir, "disk%d" % i), "w") as f:
            f.write(what)

    def tearDown(self):
        for i in self.paused:
            if self.nodes[i].alive():
                self.nodes[i].proc.send_signal(signal.SIGCONT)
        codes = {i: n.stop() for i, n in self.nodes.items()}
        self.proxy.stop()
        logs = {i: n.log_text() for i, n in self.nodes.items()}
        shutil.rmtree(self.dir, ignore_errors=True)
        for i, code in codes.items():
            if code not in (0, None):
                raise AssertionError("node %d exited %s: %s" % (i, code, logs[i][-3000:]))

    def urls(self):
        ports = [n.port for n in self.nodes.values()]
        if FEED:  # (any node serves: the first that answers)
            random.shuffle(ports)
        return ",".join("tcp://127.0.0.1:%d" % p for p in ports)

    def leader(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, n in self.nodes.items():
                if not n.alive() or i in self.paused:
                    continue
                r = mqr("cluster", "status", "--json", "--url", "tcp://127.0.0.1:%d" % n.port, timeout=10)
                if r.returncode == 0 and '"leading": true' in r.stdout.replace('"leading":true', '"leading": true'):
                    return i
            time.sleep(0.1)
        return None

    def nemesis(self, stop):
        faults = ["isolate-leader", "cut-follower", "disk-eio-leader", "delay", "kill-leader", "disk-full-follower",
                  "pause-leader"]
        k = 0
        while not stop.is_set():
            fault = faults[k % len(faults)]
            k += 1
            l = self.leader(10)
            if l is None:
                self.events.append("no leader found before %s" % fault)
                time.sleep(1)
                continue
            self.events.append("%s (leader %d)" % (fault, l))
            if fault == "isolate-leader":
                self.proxy.isolate(l)
                time.sleep(2.5)
                self.proxy.heal()
            elif fault == "cut-follower":
                f = [i for i in self.nodes if i != l][k % 2]
                self.proxy.isolate(f)
                time.sleep(2)
                self.proxy.heal()
            elif fault == "delay":
                for a in self.nodes:
                    for b in self.nodes:
                        if a != b:
                            self.proxy.delay(a, b, 0.05)
                time.sleep(2)
                self.proxy.heal()
            elif fault == "kill-leader":
                self.nodes[l].stop(signal.SIGKILL)
                time.sleep(2)
                self.nodes[l].start()
            elif fault in ("disk-eio-leader", "disk-full-follower"):
                # the disk fails for a while; once it is fixed, the node is restarted, as
                # docs/cluster.md tells an operator to (it catches up from the others)
                # (a node that cannot write its log exits 1, leader or follower: libraft
                # 0.15 cannot go on safely after a failed write)
                leader_disk = fault == "disk-eio-leader"
                v = l if leader_disk else [i for i in self.nodes if i != l][k % 2]
                mark = len(self.nodes[v].log_text())
                self.disk(v, "EIO" if leader_disk else "ENOSPC")
                time.sleep(2.5)
                self.disk(v, "")
                code = self.nodes[v].stop()
                log = self.nodes[v].log_text()[mark:]
                want = 0
                if "cannot write its Raft log" in log:  # (it wrote nothing in the 2.5 s: 0)
                    want = 1
                    self.disk_exits += 1
                self.restarts.append((v, code, want, log[-4000:] if code != want else ""))
                self.nodes[v].start()
            elif fault == "pause-leader":
                self.paused.add(l)
                self.nodes[l].proc.send_signal(signal.SIGSTOP)
                time.sleep(2)
                self.nodes[l].proc.send_signal(signal.SIGCONT)
                self.paused.discard(l)
            time.sleep(1.5)

    def test_histories_hold_under_faults(self):
        self.events = []
        stop = threading.Event()
        producers = [Producer(p, self.urls, stop) for p in ("a", "b")]
        for p in producers:
            p.start()
        consumer = Consumer(self.urls, stop)
        consumer.start()
        nem = threading.Thread(target=self.nemesis, args=(stop,), daemon=True)
        nem.start()
        time.sleep(SECONDS)
        stop.set()
        nem.join(60)
        for p in producers:
            p.join(60)
        consumer.join(60)
        self.proxy.heal()
        print("nemesis: " + "; ".join(self.events), file=sys.stderr)
        # every fault healed: the group serves again
        self.assertIsNotNone(self.leader(30), "no leader once the faults healed")
        sent = {p.name_: p.sent for p in producers}
        ok = {b for s in sent.values() for b, answered in s if answered}
        attempted = {b for s in sent.values() for b, _ in s}
        r = mqr("recv", "--url", self.urls(), "--count", str(len(attempted)), "--timeout", "5", "--json", "orders",
                timeout=120)
        drained = [body for _, body in received(r.stdout)]
        got = consumer.got + drained
        print("nemesis: %d sent, %d answered OK, %d received during the faults and %d after (%d distinct)"
              % (len(attempted), len(ok), len(consumer.got), len(drained), len(set(got))), file=sys.stderr)
        self.assertGreater(len(ok), 10, "too few sends answered OK to tell anything")
        lost = sorted(ok - set(got))
        self.assertEqual(lost, [], "messages answered OK and never received")
        self.assertEqual(sorted(set(got) - attempted), [], "received, never sent")
        for name in sent:  # each producer's order, first receptions only (a message sent again after an
            firsts, seen = [], set()  # in-doubt answer may be received twice, and so may one whose ack was lost)
            for g in got:
                if g.startswith(name + "-") and g not in seen:
                    seen.add(g)
                    firsts.append(g)
            self.assertEqual(firsts, sorted(firsts), "producer %s's messages out of order" % name)
        # no acknowledgement answered committed is undone: a message of a run whose acks were
        # all answered is never received again (by message id: a body sent again after an
        # in-doubt answer is another message)
        later = [(k, mid) for k, (_, msgs) in enumerate(consumer.runs) for mid, _ in msgs]
        later += [(len(consumer.runs), mid) for mid, _ in received(r.stdout)]
        committed = {mid: k for k, (ok_, msgs) in enumerate(consumer.runs) if ok_ for mid, _ in msgs}
        again = sorted({mid for k, mid in later if mid in committed and k > committed[mid]})
        print("nemesis: %d consumer runs, %d with every ack answered committed"
              % (len(consumer.runs), sum(1 for ok_, _ in consumer.runs if ok_)), file=sys.stderr)
        self.assertEqual(again, [], "acknowledged (answered committed) and delivered again")
        # a node whose disk failed exited 1 at once (it saw the failure), or, having
        # written nothing meanwhile, stops cleanly once the disk is fixed
        print("nemesis: %d disk faults, %d seen by their node (exit 1)" % (len(self.restarts), self.disk_exits),
              file=sys.stderr)
        failed = ["node %d exited %s, not %s: %s" % r for r in self.restarts if r[1] != r[2]]
        self.assertEqual(failed, [], "a restart after a disk fault failed")
        # delivery counts never go back: a message's receptions count up (a new leader has
        # the count of every delivery made before, committed before it was made)
        last, back = {}, []
        for mid, count in COUNTS:
            if count < last.get(mid, 0):
                back.append((mid, last[mid], count))
            last[mid] = max(count, last.get(mid, 0))
        self.assertEqual(back, [], "delivery counts that went back (message, before, after)")
        # no two nodes led in the same term
        terms = {}
        for i, n in self.nodes.items():
            for m in re.finditer(r"this node leads group 0 \(term (\d+)\)", n.log_text()):
                terms.setdefault(int(m.group(1)), set()).add(i)
        self.assertTrue(terms, "no leadership was logged")
        both = {t: who for t, who in terms.items() if len(who) > 1}
        self.assertEqual(both, {}, "two leaders in one term")
        if FEED:  # consumers were served on followers, fed from the leader
            fed = sum(n.log_text().count("here is fed from node") for n in self.nodes.values())
            print("nemesis: %d feeds of a follower's consumers" % fed, file=sys.stderr)
            self.assertGreater(fed, 0, "no consumer was served on a follower")


if __name__ == "__main__":
    MQRD, MQR, DISKFAULT = sys.argv[1], sys.argv[2], sys.argv[3]
    unittest.main(argv=[sys.argv[0], "-v"])
