"""STOMP 1.0, 1.1 and 1.2 against a real mqrd with Debian's python3-stomp (stomp.py):
versions and CONNECTED, bodies with NULs, every ack mode, NACK, transactions (sends and
acks), receipts, heart-beats both ways, selectors, durable subscriptions, destination
types and prefixes, 1.2 escaping; then hostile and malformed frames on raw sockets, each
answered with an ERROR frame while the broker and its other clients go on.

usage: test_stomp.py MQRD"""

import os
import socket
import sys
import threading
import time
import unittest

import stomp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import held_by_tcp, raw, reset, run_mqr, run_suite, wait_for  # noqa: E402

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - name: main
    port: 0
    protocols: [mqr, stomp]
    anycast-prefix: /queue/
    multicast-prefix: /topic/
    stomp: {max-headers: 64, max-header-length: 1024, max-frame-size: 64KiB}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true, max-delivery-attempts: -1}
  'blk.#': {max-size-bytes: 16KiB, address-full-policy: BLOCK}
addresses:
  orders: {anycast: [orders]}
  prices: {multicast: []}
"""

BROKER = None


class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.messages, self.errors, self.receipts, self.beats = [], [], [], 0
        self.connected = None
        self.lock = threading.Lock()

    def on_connected(self, frame):
        self.connected = frame

    def on_message(self, frame):
        with self.lock:
            self.messages.append(frame)

    def on_error(self, frame):
        self.errors.append(frame)

    def on_receipt(self, frame):
        self.receipts.append(frame.headers["receipt-id"])

    def on_heartbeat(self):
        self.beats += 1

    def wait(self, n, timeout=5.0):
        wait_for(lambda: len(self.messages) >= n, timeout)
        return self.messages


def connect(version="1.2", heartbeats=(0, 0), headers=None, auto_decode=True):
    cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}[version]
    kw = {} if version == "1.0" else {"heartbeats": heartbeats}
    c = cls([("127.0.0.1", BROKER.port)], auto_decode=auto_decode, **kw)
    listener = Listener()
    c.set_listener("", listener)
    c.connect(wait=True, headers=headers or {})
    return c, listener


def ack(c, version, frame):
    h = frame.headers
    if version == "1.2":
        c.ack(h["ack"])
    elif version == "1.1":
        c.ack(h["message-id"], h["subscription"])
    else:
        c.ack(h["message-id"])


def nack(c, frame):
    c.nack(frame.headers["ack"])


class Stomp(unittest.TestCase):
    def test_versions_and_bodies(self):
        for version in ("1.0", "1.1", "1.2"):
            c, l = connect(version)
            if version != "1.0":
                self.assertEqual(l.connected.headers["version"], version)
            self.assertTrue(l.connected.headers["server"].startswith("mqr/"))
            q = "/queue/v" + version
            c.subscribe(destination=q, id="s", ack="auto")
            c.send(destination=q, body="plain " + version, headers={"color": "red", "n": "7"})
            m = l.wait(1)[0]
            self.assertEqual(m.body, "plain " + version)
            self.assertEqual(m.headers["color"], "red")
            self.assertEqual(m.headers["n"], "7")
            self.assertEqual(m.headers["destination"], q)
            self.assertEqual(m.headers["subscription"], "s")
            c.disconnect()
        # A body with NULs: content-length carries it.
        c, l = connect(auto_decode=False)
        c.subscribe(destination="/queue/bin", id="b", ack="auto")
        c.send(destination="/queue/bin", body=b"a\x00b\x00\xff", content_type="application/octet-stream")
        m = l.wait(1)[0]
        self.assertEqual(m.body, b"a\x00b\x00\xff")
        self.assertEqual(m.headers["content-length"], "5")
        self.assertEqual(m.headers["content-type"], "application/octet-stream")
        c.disconnect()

    def test_client_ack_is_cumulative(self):
        for version in ("1.0", "1.1", "1.2"):
            q = "/queue/cum" + version
            c, l = connect(version)
            c.subscribe(destination=q, id="s", ack="client")
            for i in range(3):
                c.send(destination=q, body=str(i))
            got = l.wait(3)
            self.assertEqual([m.body for m in got], ["0", "1", "2"])
            ack(c, version, got[1])  # 0 and 1
            time.sleep(0.2)
            c.disconnect()
            c, l = connect(version)
            c.subscribe(destination=q, id="s", ack="client")
            got = l.wait(1)
            time.sleep(0.2)
            self.assertEqual([m.body for m in got], ["2"], version)
            self.assertEqual(got[0].headers.get("redelivered"), "true")
            ack(c, version, got[0])
            c.disconnect()

    def test_client_individual_ack_and_nack(self):
        c, l = connect()
        c.subscribe(destination="/queue/ind", id="s", ack="client-individual")
        for i in range(3):
            c.send(destination="/queue/ind", body=str(i))
        got = l.wait(3)
        ack(c, "1.2", got[0])
        ack(c, "1.2", got[2])
        nack(c, got[1])  # back to the queue, delivered again at once
        again = l.wait(4)
        self.assertEqual(again[3].body, "1")
        self.assertEqual(again[3].headers["redelivered"], "true")
        ack(c, "1.2", again[3])
        time.sleep(0.2)
        c.disconnect()
        c, l = connect()
        c.subscribe(destination="/queue/ind", id="s", ack="client-individual")
        time.sleep(0.5)
        self.assertEqual(l.messages, [])  # every one acknowledged
        c.disconnect()

    def test_transactions(self):
        c, l = connect()
        c.subscribe(destination="/queue/tx", id="s", ack="client-individual")
        t = c.begin()
        c.send(destination="/queue/tx", body="aborted", transaction=t)
        c.abort(t)
        t = c.begin()
        c.send(destination="/queue/tx", body="one", transaction=t)
        c.send(destination="/queue/tx", body="two", transaction=t)
        time.sleep(0.3)
        self.assertEqual(l.messages, [])  # nothing before the commit
        c.commit(t)
        got = l.wait(2)
        self.assertEqual([m.body for m in got], ["one", "two"])
        # An ACK in an aborted transaction does not count; in a committed one it does.
        t = c.begin()
        c.ack(got[0].headers["ack"], transaction=t)
        c.abort(t)
        t = c.begin()
        c.ack(got[1].headers["ack"], transaction=t)
        c.commit(t, receipt="committed")
        wait_for(lambda: "committed" in l.receipts)
        c.disconnect()
        c, l = connect()
        c.subscribe(destination="/queue/tx", id="s", ack="client-individual")
        got = l.wait(1)
        time.sleep(0.3)
        self.assertEqual([m.body for m in got], ["one"])
        ack(c, "1.2", got[0])
        c.disconnect()
        # COMMIT of a transaction never begun: an ERROR.
        c, l = connect()
        c.commit("nope")
        wait_for(lambda: l.errors)
        self.assertEqual(l.errors[0].headers["message"], "no such transaction")

    def test_receipts(self):
        c, l = connect()
        c.subscribe(destination="/queue/r", id="s", ack="auto", receipt="sub-1")
        c.send(destination="/queue/r", body="x", receipt="send-1")
        c.unsubscribe(id="s", receipt="unsub-1")
        self.assertTrue(wait_for(lambda: len(l.receipts) == 3))
        self.assertEqual(l.receipts, ["sub-1", "send-1", "unsub-1"])
        c.disconnect(receipt="bye")  # stomp.py waits for it

    def test_heart_beats(self):
        c, l = connect(heartbeats=(500, 500))
        self.assertEqual(l.connected.headers["heart-beat"], "500,500")
        time.sleep(2.2)
        self.assertGreaterEqual(l.beats, 2)  # the broker's EOLs
        self.assertTrue(c.is_connected())  # and the client's kept it open
        c.disconnect()
        # A client that promises heart-beats and goes silent is closed: twice its period.
        s, got = raw(BROKER.port, b"CONNECT\naccept-version:1.2\nheart-beat:500,0\n\n\0", timeout=4)
        self.assertIn(b"CONNECTED", got)
        self.assertIn(b"ERROR", got)
        self.assertIn(b"heart-beat missed", got)
        s.close()

    def test_selectors(self):
        c, l = connect()
        reds, blues = Listener(), Listener()
        c.set_listener("reds", reds)
        c.remove_listener("")
        c.set_listener("", l)
        c.subscribe(destination="/topic/paint", id="red", ack="auto", headers={"selector": "color = 'red'"})
        c.subscribe(destination="/topic/paint", id="blue", ack="auto", headers={"selector": "color = 'blue' OR n > 5"})
        time.sleep(0.2)
        c.send(destination="/topic/paint", body="r", headers={"color": "red"})
        c.send(destination="/topic/paint", body="b", headers={"color": "blue"})
        got = l.wait(2)
        time.sleep(0.3)
        self.assertEqual(sorted((m.headers["subscription"], m.body) for m in got), [("blue", "b"), ("red", "r")])
        c.disconnect()

    def test_durable_subscription(self):
        c, l = connect(headers={"client-id": "app1"})
        c.subscribe(destination="/topic/news", id="d", ack="client-individual",
                    headers={"durable-subscription-name": "sub1"})
        c.disconnect()
        p, _ = connect()
        p.send(destination="/topic/news", body="while away")
        p.disconnect()
        c, l = connect(headers={"client-id": "app1"})
        c.subscribe(destination="/topic/news", id="d", ack="client-individual",
                    headers={"durable-subscription-name": "sub1"})
        got = l.wait(1)
        self.assertEqual([m.body for m in got], ["while away"])
        ack(c, "1.2", got[0])
        c.unsubscribe(id="d", headers={"durable-subscription-name": "sub1"}, receipt="gone")
        wait_for(lambda: "gone" in l.receipts)
        c.disconnect()
        p, _ = connect()
        p.send(destination="/topic/news", body="nobody")
        p.disconnect()
        c, l = connect(headers={"client-id": "app1"})
        c.subscribe(destination="/topic/news", id="d", ack="auto", headers={"durable-subscription-name": "sub1"})
        time.sleep(0.4)
        self.assertEqual(l.messages, [])  # the subscription was deleted: a new one starts empty
        c.unsubscribe(id="d", headers={"durable-subscription-name": "sub1"})
        c.disconnect()

    def test_durable_subscription_keeps_what_its_selector_matches(self):
        """The selector of a durable subscription is its queue's filter, as Artemis makes
        it: what it does not match is not kept for it while its subscriber is away."""
        mqr = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "cli", "mqr")
        c, l = connect(headers={"client-id": "app2"})
        c.subscribe(destination="/topic/weather", id="d", ack="client-individual",
                    headers={"durable-subscription-name": "rain", "selector": "kind = 'rain'"})
        c.disconnect()
        p, _ = connect()
        for kind in ("sun", "rain", "sun"):
            p.send(destination="/topic/weather", body=kind, headers={"kind": kind, "persistent": "true"})
        p.disconnect()
        held = run_mqr(mqr, "queue", "--url", "tcp://127.0.0.1:%d" % BROKER.port, "--json", "browse",
                       "app2.rain").stdout.strip().splitlines()
        self.assertEqual(len(held), 1, held)
        c, l = connect(headers={"client-id": "app2"})
        c.subscribe(destination="/topic/weather", id="d", ack="client-individual",
                    headers={"durable-subscription-name": "rain", "selector": "kind = 'rain'"})
        got = l.wait(1)
        self.assertEqual([m.body for m in got], ["rain"])
        ack(c, "1.2", got[0])
        c.unsubscribe(id="d", headers={"durable-subscription-name": "rain"}, receipt="gone")
        wait_for(lambda: "gone" in l.receipts)
        c.disconnect()

    def test_destination_types(self):
        c, l = connect()
        c.subscribe(destination="fan", id="a", ack="auto", headers={"subscription-type": "MULTICAST"})
        c.subscribe(destination="multicast://fan", id="b", ack="auto")
        c.subscribe(destination="anycast://work", id="w1", ack="auto")
        c.subscribe(destination="work", id="w2", ack="auto", headers={"subscription-type": "ANYCAST"})
        time.sleep(0.2)
        c.send(destination="fan", body="to all", headers={"destination-type": "MULTICAST"})
        for i in range(4):
            c.send(destination="anycast://work", body="job%d" % i)
        got = l.wait(6)
        time.sleep(0.3)
        fan = sorted(m.headers["subscription"] for m in got if m.body == "to all")
        self.assertEqual(fan, ["a", "b"])
        jobs = [m.headers["subscription"] for m in got if m.body.startswith("job")]
        self.assertEqual(len(jobs), 4)
        self.assertEqual(sorted(set(jobs)), ["w1", "w2"])  # one queue, its consumers in turn
        c.disconnect()

    def test_escaping(self):
        c, l = connect()
        c.subscribe(destination="/queue/esc", id="s", ack="auto")
        c.send(destination="/queue/esc", body="e", headers={"weird": "a:b\nc\\d"})
        m = l.wait(1)[0]
        self.assertEqual(m.headers["weird"], "a:b\nc\\d")
        c.disconnect()

    def test_producer_held_by_a_full_address(self):
        """A non-persistent SEND has no flow control of its own: a producer to an address
        full under BLOCK is held by TCP (the broker stops reading it), and goes on when the
        address has room again."""
        sub = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)
        sub.sendall(b"CONNECT\naccept-version:1.2\n\n\0SUBSCRIBE\ndestination:/topic/blk.t\nid:1\n"
                    b"ack:client-individual\nreceipt:r\n\n\0")  # then acks nothing, reads nothing
        time.sleep(0.3)
        pub = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)
        pub.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        pub.sendall(b"CONNECT\naccept-version:1.2\n\n\0")
        one = b"SEND\ndestination:/topic/blk.t\ncontent-length:100\n\n" + b"x" * 100 + b"\0"
        sent, held = held_by_tcp(pub, one, 150000)  # 21 MB at most, far past what the buffers take
        self.assertTrue(held, "the producer was never held (%d sent)" % sent)
        # The subscriber goes (its subscription queue with it): room, and the producer goes on.
        reset(sub)
        pub.settimeout(10)
        for _ in range(200):
            pub.sendall(one)
        pub.sendall(b"DISCONNECT\nreceipt:bye\n\n\0")
        pub.close()

    def test_hostile_frames(self):
        watcher, wl = connect()
        watcher.subscribe(destination="/queue/alive", id="s", ack="auto")
        cases = [
            (b"CONNEC\n\n\0", b"malformed frame"),
            (b"SEND\ndestination:x\n\nbefore connect\0", b"not connected"),
            (b"CONNECT\naccept-version:2.0\n\n\0", b"Supported protocol versions"),
            (b"CONNECT\naccept-version:1.2\n\n\0SEND\n" + b"".join(b"h%d:v\n" % i for i in range(100)) + b"\n\0",
             b"frame too large"),
            (b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:x\nlong:" + b"v" * 2000 + b"\n\n\0",
             b"frame too large"),
            (b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:x\ncontent-length:100000\n\n",
             b"frame too large"),
            (b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:x\nbad:\\t\n\n\0", b"malformed frame"),
            (b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:x\ncontent-length:2\n\nabc\0", b"malformed frame"),
            (b"CONNECT\naccept-version:1.2\n\n\0ACK\nid:9.9\n\n\0", b"no such message"),
            (b"CONNECT\naccept-version:1.2\n\n\0CONNECT\naccept-version:1.2\n\n\0", b"already connected"),
            (b"CONNECT\naccept-version:1.2\n\n\0MESSAGE\n\n\0", b"not a client frame"),
            (b"CONNECT\naccept-version:1.2\n\n\0SUBSCRIBE\ndestination:x\n\n\0", b"missing id"),
        ]
        for data, expect in cases:
            s, got = raw(BROKER.port, data, timeout=3)
            self.assertIn(b"ERROR", got, data[:60])
            self.assertIn(expect, got, data[:60])
            s.close()
        # A first byte that starts none of the listener's protocols: closed, nothing said.
        s, got = raw(BROKER.port, b"FOO\n\n\0", timeout=3)
        self.assertEqual(got, b"")
        s.close()
        # A frame cut short and a client gone: nothing of it stays.
        s = socket.create_connection(("127.0.0.1", BROKER.port))
        s.sendall(b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:/queue/alive\ncontent-length:10\n\nabc")
        s.close()
        self.assertTrue(BROKER.alive())
        watcher.send(destination="/queue/alive", body="still here")
        self.assertEqual(wl.wait(1)[0].body, "still here")
        watcher.disconnect()


if __name__ == "__main__":
    run_suite(CONFIG, sys.modules[__name__])
