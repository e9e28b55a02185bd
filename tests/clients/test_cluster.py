"""Replicated durable queues across three mqrd processes (docs/cluster.md): each started
as a user would, on 127.0.0.1 with its own data directory and cluster ports. A send to
a replicated address is answered by the node that leads its group once a majority has
it, refused elsewhere with the leader's name; the leader killed with SIGKILL, the two
others elect one that holds every message answered OK (less those acknowledged) and
serves at once; the killed node comes back and follows.

Usage: test_cluster.py MQRD MQR"""

import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, free_port, self_signed  # noqa: E402

MQRD, MQR, DISKFAULT = None, None, None


def mqr(*args, check=True, timeout=60):
    r = subprocess.run([MQR] + list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("mqr %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def mqr_popen(*args):
    """mqr running meanwhile: communicate() gives what it printed."""
    return subprocess.Popen([MQR] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def config(i, raft_ports, data, client_ports=None, protocols="mqr, http", extra=""):
    """Node i's config; with client_ports, each peer's url too (sends are forwarded)."""
    peers = ", ".join("{id: %d, address: 127.0.0.1:%d%s}" % (
        k + 1, p, (", url: tcp://127.0.0.1:%d" % client_ports[k]) if client_ports else "")
        for k, p in enumerate(raft_ports) if k != i)
    port = client_ports[i] if client_ports else 0
    return """security: {allow-anonymous: true}
listeners:
  - {name: main, host: 127.0.0.1, port: %d, protocols: [%s], http: {anonymous-metrics: true}}
""" % (port, protocols) + """persistence: {directory: %s}
address-settings:
  "orders.#": {replicated: true}
addresses:
  orders: {anycast: [orders]}
  local: {anycast: [local]}
cluster:
  node-id: %d
  bind: 127.0.0.1:%d
  peers: [%s]
""" % (data, i + 1, raft_ports[i], peers) + extra


def stop_all(nodes, directory):
    """A class's end: every node stopped (each must exit 0), its directory removed."""
    codes = [n.stop() for n in nodes]
    logs = [n.log_text() for n in nodes]
    shutil.rmtree(directory, ignore_errors=True)
    for i, code in enumerate(codes):
        if code != 0:
            raise AssertionError("node %d exited %s: %s" % (i + 1, code, logs[i][-3000:]))


class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="mqr-cluster-")
        cls.raft = [free_port() for _ in range(3)]
        cls.data = [os.path.join(cls.dir, "n%d" % (i + 1)) for i in range(3)]
        cls.nodes = [Mqrd(MQRD, config(i, cls.raft, cls.data[i])) for i in range(3)]

    @classmethod
    def tearDownClass(cls):
        stop_all(cls.nodes, cls.dir)

    def url(self, i):
        return "tcp://127.0.0.1:%d" % self.nodes[i].port

    def leader(self, among=(0, 1, 2), timeout=20):
        """The node whose durable send to 'orders' is answered OK: (index, seconds it took)."""
        start = time.time()
        while time.time() < start + timeout:
            for i in among:
                r = mqr("send", "--url", self.url(i), "--durable", "--body", "probe", "orders", check=False, timeout=20)
                if r.returncode == 0:
                    return i, time.time() - start
            time.sleep(0.05)
        raise AssertionError("no node serves 'orders' within %d s" % timeout)

    def drain(self, i, n):
        r = mqr("recv", "--url", self.url(i), "--count", str(n), "--timeout", "10", "orders")
        return r.stdout.splitlines()

    def test_1_replicated_sends_survive_the_leaders_kill(self):
        l, _ = self.leader()
        self.drain(l, 1)  # (the probe)
        # a follower refuses, naming the leader
        f = (l + 1) % 3
        r = mqr("send", "--url", self.url(f), "--durable", "--body", "x", "orders", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("ENOTLEADER", r.stderr)
        self.assertIn("led by node %d" % (l + 1), r.stderr)
        r = mqr("send", "--url", self.url(f), "--body", "not-durable", "orders", check=False)  # not a black hole
        self.assertEqual(r.returncode, 1)
        self.assertIn("ENOTLEADER", r.stderr)
        # answered OK by the leader: 30 bodies, 10 each
        for b in range(30):
            r = mqr("send", "--url", self.url(l), "--durable", "--body", "b%02d" % b, "--count", "10", "orders")
            self.assertIn("OK 10", r.stdout)
        # 25 consumed and acknowledged there (the first 25 sent: b00 x10, b01 x10, b02 x5)
        got = self.drain(l, 25)
        self.assertEqual(got, ["b00"] * 10 + ["b01"] * 10 + ["b02"] * 5)
        # (mqr recv's last ack is answered once the group committed every DELETE before it)
        # an address that is not replicated stays the node's own
        mqr("send", "--url", self.url(f), "--durable", "--body", "mine", "local")
        # the leader goes, as a machine does
        self.nodes[l].stop(signal.SIGKILL)
        others = [i for i in range(3) if i != l]
        n, took = self.leader(among=others)
        print("failover: node %d serves 'orders' %.2f s after node %d's SIGKILL" % (n + 1, took, l + 1),
              file=sys.stderr)
        self.assertLess(took, 15)
        got = self.drain(n, 276)  # 275 left, and the probe that found it
        bodies = [g for g in got if g != "probe"]
        self.assertEqual(len(bodies), 275)
        self.assertEqual(bodies, ["b02"] * 5 + ["b%02d" % b for b in range(3, 30) for _ in range(10)])  # in order
        r = mqr("recv", "--url", self.url(f), "--count", "1", "--timeout", "5", "local")
        self.assertEqual(r.stdout.strip(), "mine")
        # the killed node comes back and follows: sends to it are refused, the leader's go on
        self.nodes[l].start()
        time.sleep(1)
        r = mqr("send", "--url", self.url(l), "--durable", "--body", "x", "orders", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("led by node %d" % (n + 1), r.stderr)
        mqr("send", "--url", self.url(n), "--durable", "--body", "later", "--count", "5", "orders")
        self.assertEqual(self.drain(n, 5), ["later"] * 5)

    def test_2_the_group_needs_a_majority(self):
        """With two of three nodes down, a send is not answered OK (its group has no
        majority); once one comes back, the group serves again."""
        l, _ = self.leader()
        self.drain(l, 1)
        others = [i for i in range(3) if i != l]
        for i in others:
            self.nodes[i].stop(signal.SIGKILL)
        r = mqr("send", "--url", self.url(l), "--durable", "--body", "alone", "--timeout", "3", "orders", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.nodes[others[0]].start()
        self.nodes[others[1]].start()
        n, _ = self.leader()
        mqr("send", "--url", self.url(n), "--durable", "--body", "back", "orders")
        r = mqr("recv", "--url", self.url(n), "--count", "3", "--timeout", "3", "orders", check=False)
        # 'alone' was never answered OK: it may or may not be there (at least once); 'back' is
        self.assertIn("back", r.stdout.splitlines())

    def test_3_clients_given_every_node_find_the_leader(self):
        """mqr send and recv with --url of all three nodes: the one that leads serves, the
        others give way; with the leader gone, the same command finds the next."""
        urls = ",".join(self.url(i) for i in range(3))
        l, _ = self.leader()
        self.drain(l, 1)
        r = mqr("send", "--url", urls, "--durable", "--body", "any", "--count", "20", "orders")
        self.assertIn("OK 20", r.stdout)
        self.nodes[l].stop(signal.SIGKILL)
        deadline = time.time() + 15
        while True:  # until a majority has elected one (the command itself tries every node)
            r = mqr("send", "--url", urls, "--durable", "--body", "after", "--count", "10", "orders", check=False)
            if r.returncode == 0 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertIn("OK 10", r.stdout)
        r = mqr("recv", "--url", urls, "--count", "30", "--timeout", "10", "orders")
        got = [g for g in r.stdout.splitlines() if g != "probe"]
        self.assertEqual(got, ["any"] * 20 + ["after"] * 10)
        self.nodes[l].start()
        r = mqr("send", "--url", ",".join(["tcp://127.0.0.1:1"] * 17), "--body", "x", "orders", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("at most 16 URLs", r.stderr)

    def status(self, i):
        r = mqr("cluster", "status", "--json", "--url", self.url(i))
        return [json.loads(line) for line in r.stdout.splitlines()]

    def test_4_status_metrics_and_a_leadership_moved(self):
        """mqr cluster status on each node: all agree on the leader, which sees each follower's
        lag; the same in /metrics; transfer-leader hands the group to the node named, which
        then serves it."""
        l, _ = self.leader()
        self.drain(l, 1)
        deadline = time.time() + 10
        while True:
            rows = [self.status(i) for i in range(3)]
            lead = rows[l][0]
            if (all(r[0]["leader"] == l + 1 for r in rows) and lead.get("lag.%d" % ((l + 1) % 3 + 1)) == 0
                    and lead.get("lag.%d" % ((l + 2) % 3 + 1)) == 0) or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertTrue(lead["leading"])
        self.assertEqual([r[0]["leading"] for r in rows].count(True), 1)
        self.assertEqual({r[0]["leader"] for r in rows}, {l + 1})
        self.assertEqual(lead["lag.%d" % ((l + 1) % 3 + 1)], 0)
        self.assertGreaterEqual(lead["term"], 1)
        self.assertEqual(lead["commit_index"], lead["applied_index"])
        self.assertEqual(lead["held_back"], 0)  # (no follower had 32 MiB on its way)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.nodes[l].port, timeout=10) as resp:
            text = resp.read().decode()
        self.assertRegex(text, r'mqr_cluster_leading\{broker="[^"]*",group="0"\} 1')
        self.assertRegex(text, r'mqr_cluster_leader\{broker="[^"]*",group="0"\} %d' % (l + 1))
        self.assertRegex(text, r'mqr_cluster_follower_lag\{broker="[^"]*",group="0",follower="%d"\} \d+'
                         % ((l + 1) % 3 + 1))
        self.assertRegex(text, r'mqr_cluster_held_back_total\{broker="[^"]*",group="0"\} 0')
        # the leadership handed to another node
        to = (l + 1) % 3
        r = mqr("cluster", "transfer-leader", "0", str(to + 1), "--url", self.url(l))
        self.assertIn("moving to node %d" % (to + 1), r.stdout)
        n, _ = self.leader()
        self.assertEqual(n, to)
        self.drain(n, 1)
        r = mqr("cluster", "transfer-leader", "0", "--url", self.url(l), check=False)  # no longer the leader
        self.assertEqual(r.returncode, 1)
        self.assertIn("led by node %d" % (to + 1), r.stderr)

    def test_5_a_node_added_and_one_removed(self):
        """A fourth node started with join: true is added to the group (mqr cluster add-node)
        and catches up; a follower is removed and stopped; with the other original
        follower killed, the leader and the new node are a majority and serve."""
        l, _ = self.leader()
        self.drain(l, 1)
        urls = ",".join(self.url(i) for i in range(3))
        mqr("send", "--url", urls, "--durable", "--body", "before", "--count", "5", "orders")
        raft4 = free_port()
        cfg = config(3, self.raft + [raft4], os.path.join(self.dir, "n4")).replace("node-id: 4", "node-id: 4\n  join: true")
        self.nodes.append(Mqrd(MQRD, cfg))
        r = mqr("cluster", "add-node", "4", "127.0.0.1:%d" % raft4, "--url", urls)
        self.assertIn("node 4 being added in 1 group(s)", r.stdout)
        deadline = time.time() + 20
        while True:  # a voter, caught up: the leader sees it at lag 0
            lead = self.status(l)[0]
            if lead.get("lag.4") == 0 or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(lead.get("lag.4"), 0)
        four = self.status(3)[0]
        self.assertEqual(four["leader"], l + 1)
        self.assertGreaterEqual(four["messages"], 5)  # the replicated state came to it
        f, f2 = [i for i in range(3) if i != l]
        r = mqr("cluster", "remove-node", str(f + 1), "--url", urls)
        self.assertIn("node %d being removed" % (f + 1), r.stdout)
        deadline = time.time() + 20
        while "lag.%d" % (f + 1) in self.status(l)[0] and time.time() < deadline:
            time.sleep(0.1)
        self.assertNotIn("lag.%d" % (f + 1), self.status(l)[0])
        self.nodes[f].stop()
        self.nodes[f2].stop(signal.SIGKILL)
        r = mqr("send", "--url", self.url(l), "--durable", "--body", "with-four", "orders")
        self.assertIn("OK 1", r.stdout)
        self.assertEqual(self.drain(l, 6), ["before"] * 5 + ["with-four"])
        self.nodes[f2].start()  # (it stops cleanly at the end)


class ThreeNodes(unittest.TestCase):
    """Three nodes for a class's tests, each with its client port known to the others."""
    PREFIX, PROTOCOLS, EXTRA = "mqr-cluster-", "mqr, http", ""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix=cls.PREFIX)
        raft, ports = [free_port() for _ in range(3)], [free_port() for _ in range(3)]
        cls.nodes = [Mqrd(MQRD, config(i, raft, os.path.join(cls.dir, "n%d" % (i + 1)), ports, cls.PROTOCOLS,
                                       cls.EXTRA), env=cls.env(i)) for i in range(3)]

    @classmethod
    def env(cls, i):
        """Node i's environment beyond the test's own (None: nothing more)."""
        return None

    @classmethod
    def tearDownClass(cls):
        stop_all(cls.nodes, cls.dir)

    def url(self, i):
        return "tcp://127.0.0.1:%d" % self.nodes[i].port

    def leader(self):
        deadline = time.time() + 20
        while time.time() < deadline:
            for i, n in enumerate(self.nodes):
                if not n.alive():
                    continue
                r = mqr("cluster", "status", "--json", "--url", self.url(i), check=False)
                if r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["leading"]:
                    return i
            time.sleep(0.1)
        raise AssertionError("no leader")

    def stomp_take(self, port, body_wanted):
        """A STOMP connection holding one delivery of 'orders' unacknowledged: (socket, ack id)."""
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
        s.sendall(b"SUBSCRIBE\nid:1\ndestination:orders\nack:client-individual\n\n\0")
        got = b""
        while b"MESSAGE" not in got or not got.endswith(b"\0"):
            got += s.recv(65536)
        self.assertIn(body_wanted.encode(), got)
        return s, re.search(rb"\nack:([^\n]+)\n", got).group(1)


class Forwarding(ThreeNodes):
    """With each peer's url in the config, a node that does not lead forwards a send to
    the leader and answers with the leader's receipt; after the leader's SIGKILL, the same
    follower forwards to the next."""
    PREFIX = "mqr-cluster-fwd-"

    def test_sends_to_a_follower_reach_the_leader(self):
        l = self.leader()
        f = (l + 1) % 3
        r = mqr("send", "--url", self.url(f), "--durable", "--body", "fwd-durable", "--count", "50", "orders")
        self.assertIn("OK 50", r.stdout)
        r = mqr("send", "--url", self.url(f), "--body", "fwd-plain", "orders")  # not durable: forwarded too
        self.assertIn("OK 1", r.stdout)
        r = mqr("recv", "--url", self.url(l), "--count", "51", "--timeout", "10", "orders")
        self.assertEqual(r.stdout.splitlines(), ["fwd-durable"] * 50 + ["fwd-plain"])
        # the leader goes; the follower forwards to the next one, once there is one
        self.nodes[l].stop(signal.SIGKILL)
        deadline = time.time() + 15
        while True:
            r = mqr("send", "--url", self.url(f), "--durable", "--body", "after", "orders", check=False)
            if r.returncode == 0 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertIn("OK 1", r.stdout)
        n = self.leader()
        r = mqr("recv", "--url", self.url(n), "--count", "1", "--timeout", "10", "orders")
        self.assertEqual(r.stdout.strip(), "after")
        self.nodes[l].start()


class FollowerManagement(ThreeNodes):
    """A replicated queue's messages are its group leader's to browse, purge, pause, move:
    a follower (whose queue holds none of them) refuses, naming the leader (native: a
    REDIRECT, which mqr follows; HTTP: 421), rather than answer with its own empty queue."""
    PREFIX = "mqr-cluster-manage-"

    def http(self, i, path, post=False):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.nodes[i].port, path), method="POST" if post else "GET",
                                     headers={"X-Requested-With": "test"} if post else {}, data=b"{}" if post else None)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_a_follower_gives_way_to_the_leader(self):
        l = self.leader()
        f = (l + 1) % 3
        for k in range(3):
            mqr("send", "--url", self.url(f), "--durable", "--body", "m%d" % k, "orders")  # (forwarded)
        # mqr, given only the follower, is redirected to the leader and sees the three
        r = mqr("queue", "browse", "orders", "--json", "--url", self.url(f))
        bodies = [json.loads(line)["@body"] for line in r.stdout.splitlines()]
        self.assertEqual(bodies, ["m0", "m1", "m2"])
        # the HTTP API of the follower says 421, naming the leader; the leader's answers
        code, j = self.http(f, "/api/v1/queues/orders/messages")
        self.assertEqual((code, j["code"]), (421, "ENOTLEADER"), j)
        self.assertIn("node %d" % (l + 1), j["error"])
        code, j = self.http(f, "/api/v1/queues/orders/purge", post=True)
        self.assertEqual((code, j["code"]), (421, "ENOTLEADER"), j)
        code, j = self.http(l, "/api/v1/queues/orders/messages")
        self.assertEqual((code, j["count"]), (200, 3), j)
        # a purge through the follower purges the leader's queue, and every node's state
        r = mqr("queue", "purge", "orders", "--url", self.url(f))
        self.assertIn("3 message(s) purged", r.stdout)
        code, j = self.http(l, "/api/v1/queues/orders/messages")
        self.assertEqual((code, j["count"]), (200, 0), j)
        # a non-replicated queue is every node's own: the follower answers for its own
        mqr("send", "--url", self.url(f), "--durable", "--body", "here", "local")
        code, j = self.http(f, "/api/v1/queues/local/messages")
        self.assertEqual((code, j["count"]), (200, 1), j)


class AcksAnsweredOnceCommitted(ThreeNodes):
    """An acknowledgement a client asks to hear about (mqr recv's last, through the native
    Ack's receipt; a STOMP ACK with a receipt) is answered only once the group has
    committed its DELETE: never while both followers are stopped (SIGSTOP), the leader
    alone. Once answered, it holds: the message is not delivered again."""
    PREFIX, PROTOCOLS = "mqr-cluster-acks-", "mqr, stomp, http"

    def pause_followers(self, l, sig):
        for i in range(3):
            if i != l:
                self.nodes[i].proc.send_signal(sig)

    def settle(self, body, answered):
        """After the followers resume: an answered ack's message is gone for good; one not
        answered OK may come again (at least once). The queue is drained."""
        r = mqr("recv", "--url", self.url(self.leader()), "--count", "5", "--timeout", "2", "orders", check=False)
        if answered:
            self.assertNotIn(body, r.stdout.splitlines(), "an acknowledgement answered OK was delivered again")

    def test_native_ack_receipt(self):
        l = self.leader()
        mqr("send", "--url", self.url(l), "--durable", "--body", "n1", "orders")
        self.pause_followers(l, signal.SIGSTOP)
        try:
            p = subprocess.Popen([MQR, "recv", "--url", self.url(l), "--count", "1", "orders"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.5)
            self.assertNotEqual(p.poll(), 0, "the ack was answered OK with the leader alone")
        finally:
            self.pause_followers(l, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(out.strip(), "n1")
        if p.returncode != 0:  # the leader stepped down: the ack was refused, not lost
            self.assertIn("EINDOUBT", err)
        self.settle("n1", p.returncode == 0)

    def test_stomp_ack_receipt(self):
        l = self.leader()
        mqr("send", "--url", self.url(l), "--durable", "--body", "s1", "orders")
        s, ack = self.stomp_take(self.nodes[l].port, "s1")
        try:
            self.pause_followers(l, signal.SIGSTOP)
            try:
                s.sendall(b"ACK\nid:" + ack + b"\nreceipt:r1\n\n\0")
                s.settimeout(1.5)
                early = b""
                try:
                    early = s.recv(65536)
                except socket.timeout:
                    pass
                self.assertNotIn(b"RECEIPT", early, "the ACK was answered with the leader alone")
            finally:
                self.pause_followers(l, signal.SIGCONT)
            s.settimeout(30)
            late = early
            while b"RECEIPT" not in late and b"ERROR" not in late:
                more = s.recv(65536)
                if not more:
                    break
                late += more
            answered = b"RECEIPT\nreceipt-id:r1" in late
            self.assertTrue(answered or b"EINDOUBT" in late, late)
        finally:
            s.close()
        self.settle("s1", answered)

    def transfer(self, frm, to):
        mqr("cluster", "transfer-leader", "0", str(to + 1), "--url", self.url(frm))
        deadline = time.time() + 20
        while self.leader() != to and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.leader(), to)

    def test_a_delivery_from_a_lost_leadership_is_not_acked(self):
        """A delivery made before its node lost the group's leadership (and led again)
        cannot be acknowledged: the group's new leadership delivers the message anew, and
        an ack of the old delivery would delete it under the new one."""
        l = self.leader()
        mqr("send", "--url", self.url(l), "--durable", "--body", "t1", "orders")
        s, ack = self.stomp_take(self.nodes[l].port, "t1")
        try:
            other = (l + 1) % 3
            self.transfer(l, other)
            self.transfer(other, l)
            s.sendall(b"ACK\nid:" + ack + b"\nreceipt:r2\n\n\0")
            answer = b""  # (a new delivery of t1 may come first: it is on the queue again)
            while b"RECEIPT" not in answer and b"ERROR" not in answer:
                more = s.recv(65536)
                if not more:
                    break
                answer += more
            self.assertNotIn(b"RECEIPT", answer)
            self.assertIn(b"ERROR", answer)  # not outstanding: that delivery is gone
        finally:
            s.close()
        r = mqr("recv", "--url", self.url(l), "--count", "1", "--timeout", "5", "orders")
        self.assertEqual(r.stdout.strip(), "t1")  # delivered again, and this time acknowledged


class DeliveryCounts(ThreeNodes):
    """A delivery's count is an UPDATE the group commits; a message given back before that
    commit is not delivered again until it has: so a new leader, which has every committed
    count, never delivers it with a lower count than one a consumer saw. Here both
    followers are stopped (the leader stays leader: a long election timeout), a STOMP
    consumer takes the message and goes without acknowledging it, and another consumer
    gets nothing until the followers resume."""
    PREFIX, PROTOCOLS, EXTRA = "mqr-cluster-counts-", "mqr, stomp, http", "  election-timeout: 5s\n"

    def take(self, port):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
        s.sendall(b"SUBSCRIBE\nid:1\ndestination:orders\nack:client-individual\n\n\0")
        return s

    def test_a_message_given_back_waits_for_its_count(self):
        l = self.leader()
        mqr("send", "--url", self.url(l), "--durable", "--body", "c1", "orders")
        for i in range(3):
            if i != l:
                self.nodes[i].proc.send_signal(signal.SIGSTOP)
        try:
            s = self.take(self.nodes[l].port)
            got = b""
            while b"c1" not in got:
                got += s.recv(65536)
            s.close()  # not acknowledged: back to the queue, its count (1) not committed
            s = self.take(self.nodes[l].port)
            s.settimeout(1.5)
            early = b""
            try:
                while True:
                    more = s.recv(65536)
                    if not more:
                        break
                    early += more
            except socket.timeout:
                pass
            self.assertNotIn(b"MESSAGE", early, "delivered again before its count was committed")
        finally:
            for i in range(3):
                if i != l:
                    self.nodes[i].proc.send_signal(signal.SIGCONT)
        s.settimeout(20)
        late = early
        while b"c1" not in late:
            late += s.recv(65536)
        s.close()
        r = mqr("recv", "--url", self.url(self.leader()), "--count", "1", "--timeout", "5", "--json", "orders")
        self.assertGreaterEqual(json.loads(r.stdout)["delivery_count"], 2)


class Redirects(ThreeNodes):
    """With follower-consumers: redirect, a follower refuses a consumer of a replicated
    address and says where the leader's clients connect: a native REDIRECT before the ENOTLEADER error (mqr recv follows it),
    MQTT 5's DISCONNECT 0x9C with a Server Reference."""
    PREFIX, PROTOCOLS, EXTRA = "mqr-cluster-redirect-", "mqr, mqtt, http", "  follower-consumers: redirect\n"

    def test_mqr_recv_follows_the_redirect(self):
        l = self.leader()
        f = (l + 1) % 3
        mqr("send", "--url", self.url(l), "--durable", "--body", "r1", "orders")
        r = mqr("recv", "--url", self.url(f), "--count", "1", "--timeout", "5", "orders")  # only the follower's url
        self.assertEqual(r.stdout.strip(), "r1")

    def test_mqtt5_is_told_the_server_reference(self):
        import paho.mqtt.client as paho
        l = self.leader()
        f = (l + 1) % 3
        got = {}
        done = threading.Event()

        def on_disconnect(c, userdata, rc, properties=None):
            got["rc"] = rc
            got["ref"] = getattr(properties, "ServerReference", None) if properties else None
            done.set()

        c = paho.Client(client_id="redirected", protocol=paho.MQTTv5)
        c.on_disconnect = on_disconnect
        c.connect("127.0.0.1", self.nodes[f].port)
        c.loop_start()
        try:
            c.subscribe("orders/x", qos=1)
            self.assertTrue(done.wait(10), "not disconnected")
        finally:
            c.loop_stop()
        self.assertEqual(int(got["rc"].value if hasattr(got["rc"], "value") else got["rc"]), 0x9C)
        self.assertEqual(got["ref"], "127.0.0.1:%d" % self.nodes[l].port)


class FollowerConsumers(ThreeNodes):
    """A consumer of a replicated queue on a node that does not lead its group is served
    there, fed from the leader (follower-consumers: feed, the default): native, STOMP
    and MQTT consumers get what was sent through any node, their acknowledgements reach
    the leader (an answered one is never delivered again), and a consumer on a follower
    goes on after the leader's SIGKILL."""
    PREFIX, PROTOCOLS = "mqr-cluster-feed-", "mqr, stomp, mqtt, http"

    def drained(self, queue="orders"):
        """Nothing is left on the leader's queue (every acknowledgement reached it)."""
        r = mqr("recv", "--url", self.url(self.leader()), "--count", "1", "--timeout", "1", queue, check=False)
        self.assertEqual(r.stdout.strip(), "", "an acknowledged message was delivered again")

    def test_1_native_consumer_on_a_follower(self):
        l = self.leader()
        f, g = (l + 1) % 3, (l + 2) % 3
        mqr("send", "--url", self.url(l), "--durable", "--body", "a", "--count", "60", "orders")
        mqr("send", "--url", self.url(g), "--durable", "--body", "b", "--count", "40", "orders")  # forwarded
        r = mqr("recv", "--url", self.url(f), "--count", "100", "--timeout", "10", "orders")
        self.assertEqual(r.stdout.splitlines(), ["a"] * 60 + ["b"] * 40)
        self.drained()
        self.assertIn("is fed from node %d" % (l + 1), self.nodes[f].log_text())

    def test_2_stomp_ack_receipt_on_a_follower(self):
        l = self.leader()
        f = (l + 1) % 3
        mqr("send", "--url", self.url(l), "--durable", "--body", "s-follower", "orders")
        s, ack = self.stomp_take(self.nodes[f].port, "s-follower")
        try:
            s.sendall(b"ACK\nid:" + ack + b"\nreceipt:r1\n\n\0")
            answer = b""
            while b"RECEIPT" not in answer and b"ERROR" not in answer:
                answer += s.recv(65536)
            self.assertIn(b"RECEIPT\nreceipt-id:r1", answer)
            s.sendall(b"DISCONNECT\n\n\0")
        finally:
            s.close()
        self.drained()

    def test_3_mqtt_subscriber_on_a_follower(self):
        import paho.mqtt.client as paho
        l = self.leader()
        f = (l + 1) % 3
        got, subscribed = [], threading.Event()
        c = paho.Client(client_id="fed", clean_session=True)
        c.on_subscribe = lambda *a: subscribed.set()
        c.on_message = lambda cl, u, m: got.append(m.payload.decode())
        c.connect("127.0.0.1", self.nodes[f].port)
        c.loop_start()
        try:
            c.subscribe("orders/events", qos=1)
            self.assertTrue(subscribed.wait(10), "no SUBACK")
            deadline = time.time() + 10  # (the feed from the leader starts just after the SUBACK)
            while "is fed from" not in self.nodes[f].log_text() and time.time() < deadline:
                time.sleep(0.05)
            for i in range(20):
                mqr("send", "--url", self.url(i % 3), "--durable", "--body", "e%d" % i, "orders.events")
            deadline = time.time() + 10
            while len(got) < 20 and time.time() < deadline:
                time.sleep(0.05)
        finally:
            c.loop_stop()
            c.disconnect()
        self.assertEqual(sorted(got, key=lambda b: int(b[1:])), ["e%d" % i for i in range(20)])

    def test_6_a_selective_consumer_on_a_follower(self):
        """The feed of consumers that share a selector carries it to the leader: what they
        do not match stays there (for others), and does not stop what they do."""
        l = self.leader()
        f = (l + 1) % 3
        for i in range(30):
            color = "red" if i % 3 == 0 else "blue"
            mqr("send", "--url", self.url(l), "--durable", "--body", "%s-%d" % (color, i), "--property",
                "color=" + color, "orders")
        r = mqr("recv", "--url", self.url(f), "--count", "10", "--timeout", "10", "--selector", "color = 'red'",
                "orders")
        self.assertEqual(r.stdout.splitlines(), ["red-%d" % i for i in range(0, 30, 3)])
        r = mqr("recv", "--url", self.url(f), "--count", "20", "--timeout", "10", "orders")  # the others, in order
        self.assertEqual(r.stdout.splitlines(), ["blue-%d" % i for i in range(30) if i % 3])
        self.drained()

    def test_7_consumers_with_different_selectors_on_a_follower(self):
        """Consumers on a follower with different selectors: the feed asks the leader for
        what either matches, so more messages that neither does than the feed's window
        (1000) stay on the leader and do not hold back theirs."""
        l = self.leader()
        f = (l + 1) % 3
        mqr("send", "--url", self.url(l), "--durable", "--count", "1200", "--body", "grey", "--property",
            "color=grey", "orders")
        for i in range(10):
            color = "red" if i % 2 == 0 else "green"
            mqr("send", "--url", self.url(l), "--durable", "--body", "%s-%d" % (color, i), "--property",
                "color=" + color, "orders")
        recv = [mqr_popen("recv", "--url", self.url(f), "--count", "5", "--timeout", "15", "--selector",
                          "color = '%s'" % color, "orders") for color in ("red", "green")]
        outs = [p.communicate(timeout=30)[0] for p in recv]
        self.assertEqual([p.returncode for p in recv], [0, 0], outs)
        self.assertEqual(outs[0].splitlines(), ["red-%d" % i for i in range(0, 10, 2)])
        self.assertEqual(outs[1].splitlines(), ["green-%d" % i for i in range(1, 10, 2)])
        r = mqr("recv", "--url", self.url(l), "--count", "1200", "--timeout", "20", "orders")
        self.assertEqual(r.stdout.splitlines(), ["grey"] * 1200)
        self.drained()

    def test_5_mqtt_session_on_a_follower(self):
        """A durable subscription made on a follower (an MQTT session that persists) is
        made on the leader by the feed: it takes what is sent while its client is away."""
        import paho.mqtt.client as paho
        l = self.leader()
        f = (l + 1) % 3

        def connect(got):
            subscribed = threading.Event()
            c = paho.Client(client_id="kept", clean_session=False)
            c.on_subscribe = lambda *a: subscribed.set()
            c.on_message = lambda cl, u, m: got.append(m.payload.decode())
            c.connect("127.0.0.1", self.nodes[f].port)
            c.loop_start()
            c.subscribe("orders/kept", qos=1)
            self.assertTrue(subscribed.wait(10), "no SUBACK")
            return c

        def wait_for(got, n):
            deadline = time.time() + 10
            while len(got) < n and time.time() < deadline:
                time.sleep(0.05)

        got = []
        c = connect(got)
        deadline = time.time() + 10
        while "queue 'kept.orders.kept' here is fed" not in self.nodes[f].log_text() and time.time() < deadline:
            time.sleep(0.05)
        mqr("send", "--url", self.url(l), "--durable", "--body", "while-here", "orders.kept")
        wait_for(got, 1)
        c.loop_stop()
        c.disconnect()
        self.assertEqual(got, ["while-here"])
        mqr("send", "--url", self.url(l), "--durable", "--body", "while-away", "orders.kept")  # the leader keeps it
        got = []
        c = connect(got)
        try:
            wait_for(got, 1)
        finally:
            c.loop_stop()
            c.disconnect()
        self.assertEqual(got, ["while-away"])

    def test_4_a_follower_consumer_goes_on_after_the_leaders_kill(self):
        l = self.leader()
        f = (l + 1) % 3
        mqr("send", "--url", self.url(l), "--durable", "--body", "k", "--count", "30", "orders")
        r = mqr("recv", "--url", self.url(f), "--count", "10", "--timeout", "10", "orders")
        self.assertEqual(r.stdout.splitlines(), ["k"] * 10)
        self.nodes[l].stop(signal.SIGKILL)
        try:
            r = mqr("recv", "--url", self.url(f), "--count", "20", "--timeout", "20", "orders")
            self.assertEqual(r.stdout.splitlines(), ["k"] * 20)
            self.drained()
        finally:
            self.nodes[l].start()


class RuntimeQueues(ThreeNodes):
    """A durable queue made at run time on a replicated address (management's
    queue.create here; MQTT and STOMP durable subscriptions alike) is recorded in the
    group: the next leader makes it, with its messages; its deletion is recorded too, and
    a node that comes to lead again drops the copy it kept."""
    PREFIX = "mqr-cluster-rtq-"

    def transfer(self, frm, to):
        mqr("cluster", "transfer-leader", "0", str(to + 1), "--url", self.url(frm))
        deadline = time.time() + 20
        while self.leader() != to and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.leader(), to)

    def queues(self, i):
        return mqr("stat", "--url", self.url(i)).stdout

    def test_made_and_deleted_queues_follow_the_leadership(self):
        l = self.leader()
        mqr("queue", "create", "audit1", "orders.audit", "ANYCAST", "--url", self.url(l))
        r = mqr("send", "--url", self.url(l), "--durable", "--body", "a1", "--count", "3", "orders.audit")
        self.assertIn("OK 3", r.stdout)
        n = (l + 1) % 3
        self.transfer(l, n)  # n never saw the queue made: it makes it from the group's state
        r = mqr("recv", "--url", self.url(n), "--count", "2", "--timeout", "5", "audit1")
        self.assertEqual(r.stdout.splitlines(), ["a1", "a1"])
        self.assertIn("audit1", self.queues(l))  # (l keeps its copy, emptied, while n leads)
        mqr("queue", "delete", "audit1", "--url", self.url(n))
        self.transfer(n, l)  # the deletion is in the state: l's copy goes
        self.assertNotIn("audit1", self.queues(l))
        r = mqr("recv", "--url", self.url(l), "--count", "1", "--timeout", "1", "audit1", check=False)
        self.assertNotEqual(r.returncode, 0)


class SecureLinks(unittest.TestCase):
    """Forwarded sends go over TLS to the peers' tls:// urls, as the cluster user: the
    leader sees that user, and its security-settings decide (with no anonymous access).
    The Raft links go over TLS too (raft-tls): a node accepts a link only from a peer
    whose certificate chains to the cluster's CA and which gives the cluster user."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="mqr-cluster-tls-")
        cert, key = self_signed(cls.dir)
        users = os.path.join(cls.dir, "users")
        for name, roles in (("node", "cluster"), ("alice", "producers"), ("admin", "admin")):
            mqr("user", "add", "--users-file", users, name, "--roles", roles, "--password", name + "-pw")
        raft, ports, links = ([free_port() for _ in range(3)] for _ in range(3))
        cls.raft, cls.cert, cls.key = raft, cert, key
        cls.nodes = []
        for i in range(3):
            peers = ", ".join("{id: %d, address: 127.0.0.1:%d, url: tls://127.0.0.1:%d}" % (k + 1, raft[k], links[k])
                              for k in range(3) if k != i)
            cls.nodes.append(Mqrd(MQRD, """listeners:
  - {name: main, host: 127.0.0.1, port: %d, protocols: [mqr]}
  - {name: links, host: 127.0.0.1, port: %d, protocols: [mqr], tls: {cert: %s, key: %s}}
security:
  users-file: %s
  security-settings:
    "orders.#": {send: [producers, cluster], consume: [producers]}
    "audit.#": {send: [producers], consume: [producers]}
    "#": {manage: [admin]}
persistence: {directory: %s}
address-settings:
  "orders.#": {replicated: true}
  "audit.#": {replicated: true}
addresses:
  orders: {anycast: [orders]}
  audit: {anycast: [audit]}
cluster:
  node-id: %d
  bind: 127.0.0.1:%d
  peers: [%s]
  user: node
  password: node-pw
  tls: {ca: %s, cert: %s, key: %s}
  raft-tls: true
""" % (ports[i], links[i], cert, key, users, os.path.join(cls.dir, "n%d" % (i + 1)), i + 1, raft[i], peers, cert, cert,
       key)))

    @classmethod
    def tearDownClass(cls):
        stop_all(cls.nodes, cls.dir)

    def url(self, i, who="alice"):
        return "tcp://%s:%s-pw@127.0.0.1:%d" % (who, who, self.nodes[i].port)

    def test_forwarded_over_tls_as_the_cluster_user(self):
        deadline, l = time.time() + 20, None
        while l is None and time.time() < deadline:
            for i in range(3):
                r = mqr("cluster", "status", "--json", "--url", self.url(i, "admin"), check=False)
                if r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["leading"]:
                    l = i
            time.sleep(0.1)
        self.assertIsNotNone(l, "no leader")
        f = (l + 1) % 3
        r = mqr("send", "--url", self.url(f), "--durable", "--body", "via-tls", "orders")
        self.assertIn("OK 1", r.stdout)
        r = mqr("recv", "--url", self.url(l), "--count", "1", "--timeout", "5", "orders")
        self.assertEqual(r.stdout.strip(), "via-tls")
        # alice may send to audit, the cluster user may not: the leader, which sees the
        # cluster user, refuses the forwarded send
        r = mqr("send", "--url", self.url(l), "--durable", "--body", "direct", "audit")
        self.assertIn("OK 1", r.stdout)
        r = mqr("send", "--url", self.url(f), "--durable", "--body", "forwarded", "audit", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("EPERM", r.stdout + r.stderr)
        self.assertIn("node", r.stdout + r.stderr)

    def raft_link(self, port, cert=None, key=None):
        """A TLS connection to a node's Raft port, with cert and key as its client
        certificate (None: none): the ssl socket, or the error its handshake gave."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(self.cert)
        if cert:
            ctx.load_cert_chain(cert, key)
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            return ctx.wrap_socket(s)
        except (ssl.SSLError, OSError) as e:
            s.close()
            return e

    def closed_by_node(self, link, data=b""):
        """Whether the node ends the link (an alert or EOF) after data, within 5 s."""
        if isinstance(link, Exception):
            return True
        try:
            if data:
                link.sendall(data)
            return link.recv(100) == b""
        except (ssl.SSLError, OSError):
            return True
        finally:
            link.close()

    def test_raft_links_take_only_cluster_nodes(self):
        port = self.raft[0]
        # not TLS at all: a libraft TCP handshake, as a node without raft-tls sends it
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(struct.pack("<QQQ", 1, 9, 16) + b"127.0.0.1:1\0\0\0\0\0")
        self.assertEqual(s.recv(100), b"")
        s.close()
        # TLS without a client certificate, with one of another CA
        self.assertTrue(self.closed_by_node(self.raft_link(port), b"x"))
        other = tempfile.mkdtemp(prefix="mqr-other-ca-", dir=self.dir)
        self.assertTrue(self.closed_by_node(self.raft_link(port, *self_signed(other)), b"x"))
        # the cluster's certificate, but not the cluster user's password
        def preamble(user, password):
            f = [b"127.0.0.1:1", user, password]
            return b"mqr-raft\x01" + struct.pack("<Q", 9) + b"".join(bytes([len(x)]) + x for x in f)
        link = self.raft_link(port, self.cert, self.key)
        self.assertIsInstance(link, ssl.SSLSocket)  # the handshake of a node's certificate passes
        self.assertTrue(self.closed_by_node(link, preamble(b"node", b"wrong")))
        link = self.raft_link(port, self.cert, self.key)
        self.assertTrue(self.closed_by_node(link, preamble(b"", b"")))
        deadline = time.time() + 10
        while "not this cluster's user and password" not in self.nodes[0].log_text() and time.time() < deadline:
            time.sleep(0.1)
        log = self.nodes[0].log_text()
        self.assertIn("Raft links over TLS", log)
        self.assertIn("not this cluster's user and password", log)
        self.assertIn("TLS handshake failed", log)
        # and the cluster serves on: a send to the leader is committed
        deadline, done = time.time() + 20, False
        while not done and time.time() < deadline:
            for i in range(3):
                r = mqr("send", "--url", self.url(i), "--durable", "--body", "still", "orders", check=False)
                done = done or "OK 1" in r.stdout
        self.assertTrue(done)


def free_block(n):
    """The first of n free ports in a row, below the kernel's ephemeral range: a node's group
    g listens at its bind port + g, and a port the kernel picked may have its next one taken
    by the connections the nodes make meanwhile."""
    while True:
        base = random.randrange(20000, 32000 - n)
        socks = []
        try:
            for k in range(n):
                sk = socket.socket()
                socks.append(sk)
                sk.bind(("127.0.0.1", base + k))
            return base
        except OSError:
            pass
        finally:
            for sk in socks:
                sk.close()


def group_of(address, groups):
    """The group of an address: FNV-1a (32 bits) of its name, modulo groups (docs/cluster.md)."""
    h = 2166136261
    for c in address.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h % groups


class ForwardingCycle(ThreeNodes):
    """Three groups, group g led by node g+1, and the producers of group g on node g+2:
    every node forwards sends to one peer while leading the group another peer forwards
    to it. Answers wait only for earlier answers to the same producer: when a node held
    every answer behind its oldest, each waited on the next node around the ring, for
    ever (cluster.scale found it)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="mqr-cluster-cycle-")
        raft, ports = [free_block(3) for _ in range(3)], [free_port() for _ in range(3)]
        while len({p + g for p in raft for g in range(3)}) < 9:  # (blocks apart)
            raft = [free_block(3) for _ in range(3)]
        cls.addresses = []
        for g in range(3):
            k = 0
            while group_of("ring.%d" % k, 3) != g:
                k += 1
            cls.addresses.append("ring.%d" % k)
        cls.nodes = []
        for i in range(3):
            peers = ", ".join("{id: %d, address: 127.0.0.1:%d, url: tcp://127.0.0.1:%d}" % (k + 1, raft[k], ports[k])
                              for k in range(3) if k != i)
            cls.nodes.append(Mqrd(MQRD, """security: {allow-anonymous: true}
listeners:
  - {name: main, host: 127.0.0.1, port: %d}
persistence: {directory: %s}
address-settings:
  "ring.#": {replicated: true}
addresses:
%s
cluster:
  node-id: %d
  bind: 127.0.0.1:%d
  groups: 3
  peers: [%s]
""" % (ports[i], os.path.join(cls.dir, "n%d" % (i + 1)),
                "\n".join("  %s: {anycast: [%s]}" % (a, a) for a in cls.addresses), i + 1, raft[i], peers)))

    def leading(self, i):
        """The groups node i leads."""
        r = mqr("cluster", "status", "--json", "--url", self.url(i), check=False)
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        return {row["group"] for row in rows if row.get("leading")}

    def test_nodes_that_forward_to_one_another_answer(self):
        every = ",".join(self.url(i) for i in range(3))
        for g in range(3):  # group g to node g+1 (asked once a second: a transfer takes an election)
            deadline, asked = time.time() + 30, 0
            while g not in self.leading(g) and time.time() < deadline:
                if time.time() - asked >= 1:
                    mqr("cluster", "transfer-leader", str(g), str(g + 1), "--url", every, check=False)
                    asked = time.time()
                time.sleep(0.1)
            if g not in self.leading(g):
                for i in range(3):
                    r = mqr("cluster", "status", "--json", "--url", self.url(i), check=False)
                    print("node", i + 1, r.returncode, r.stdout, r.stderr, self.nodes[i].log_path, file=sys.stderr)
            self.assertIn(g, self.leading(g), "node %d does not lead group %d (alive: %s): %s" % (
                g + 1, g, self.nodes[g].alive(), self.nodes[g].log_text()[-1500:]))
        results = [None] * 3

        def produce(g):
            results[g] = mqr("send", "--url", self.url((g + 1) % 3), "--durable", "--body", "c%d" % g, "--count",
                             "3000", "--timeout", "30", self.addresses[g], check=False)
        threads = [threading.Thread(target=produce, args=(g,)) for g in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for g in range(3):
            self.assertIn("OK 3000", results[g].stdout, results[g].stdout + results[g].stderr)
        for g in range(3):
            r = mqr("recv", "--url", self.url(g), "--count", "3000", "--timeout", "20", self.addresses[g])
            self.assertEqual(r.stdout.splitlines(), ["c%d" % g] * 3000)


class FollowerDisk(ThreeNodes):
    """A follower whose disk fills (ENOSPC from a preloaded library, diskfault.c) sees its
    failed write of the Raft log, says so and exits 1 (mqrd's fatal): the other two go on
    committing; restarted once the disk is fixed, it catches up."""
    PREFIX = "mqr-cluster-disk-"

    @classmethod
    def setUpClass(cls):
        if not DISKFAULT:
            raise unittest.SkipTest("no diskfault library given")
        cls.control = [os.path.join(tempfile.gettempdir(), "mqr-diskfault-%d-%d" % (os.getpid(), i + 1))
                       for i in range(3)]
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for c in cls.control:
            if os.path.exists(c):
                os.remove(c)

    @classmethod
    def env(cls, i):
        asan = os.environ.get("ASAN_OPTIONS", "")
        return {"LD_PRELOAD": DISKFAULT, "MQR_DISKFAULT": cls.control[i],
                "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}

    def test_a_full_follower_disk_is_seen(self):
        l = self.leader()
        f = (l + 1) % 3
        with open(self.control[f], "w") as c:
            c.write("ENOSPC")
        time.sleep(0.1)  # (the library reads its control file at most every 20 ms)
        sent, deadline = 0, time.time() + 20
        while self.nodes[f].alive() and time.time() < deadline:
            r = mqr("send", "--url", self.url(l), "--durable", "--body", "one", "--count", "4", "orders")
            self.assertIn("OK 4", r.stdout)  # the leader and the other follower make the majority
            sent += 4
            time.sleep(0.05)
        code = self.nodes[f].proc.wait(timeout=5)
        self.assertEqual(code, 1)
        log = self.nodes[f].log_text()
        self.assertIn("cannot write its Raft log", log)
        self.assertIn("No space left on device", log)
        r = mqr("send", "--url", self.url(l), "--durable", "--body", "two", "--count", "5", "orders")
        self.assertIn("OK 5", r.stdout)
        with open(self.control[f], "w") as c:
            c.write("")
        self.nodes[f].start()  # caught up from the others: the leader sees it lag no more
        deadline, lag = time.time() + 20, None
        while time.time() < deadline and lag != 0:
            r = mqr("cluster", "status", "--json", "--url", self.url(l), check=False)
            if r.returncode == 0:
                st = json.loads(r.stdout.splitlines()[0])
                lag = st.get("lag.%d" % (f + 1))
            time.sleep(0.2)
        self.assertEqual(lag, 0, r.stdout)
        r = mqr("recv", "--url", self.url(l), "--count", str(sent + 5), "--timeout", "10", "orders")
        self.assertEqual(r.stdout.splitlines(), ["one"] * sent + ["two"] * 5)


if __name__ == "__main__":
    MQRD, MQR = sys.argv[1], sys.argv[2]
    DISKFAULT = sys.argv[3] if len(sys.argv) > 3 else None
    unittest.main(argv=[sys.argv[0], "-v"])
