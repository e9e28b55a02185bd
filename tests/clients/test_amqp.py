"""AMQP 1.0 against a real mqrd with Debian's python3-qpid-proton: SASL ANONYMOUS and a
client without SASL, sends settled once the broker answered, queues and topics by
capability and by prefix, link credit, the receiver's outcomes (accepted, released,
modified, rejected), at most once both ways, selectors, bodies kept as they came, to and
from STOMP; then an anonymous client refused and hostile bytes, each closed while the
broker and its other clients go on.

usage: test_amqp.py MQRD"""

import json
import os
import shutil
import socket
import sys
import tempfile
import time
import unittest

import stomp
from proton import Data, Delivery, Described, Message, symbol
from proton.reactor import AtMostOnce, Container, DurableSubscription, Filter, LinkOption, Selector
from proton import ConnectionException
from proton.handlers import MessagingHandler, TransactionHandler
from proton.utils import BlockingConnection, LinkDetached, SendException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, raw, run_mqr, run_suite  # noqa: E402

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - name: main
    port: 0
    protocols: [mqr, stomp, amqp]
    anycast-prefix: /queue/
    multicast-prefix: /topic/
    amqp: {max-frame-size: 64KiB}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true, max-delivery-attempts: -1}
  'full.#': {max-size-bytes: 1KiB, address-full-policy: FAIL}
  'blocked.#': {max-size-bytes: 1KiB, address-full-policy: BLOCK}
  'rej.#': {dead-letter-address: dla.rej, max-delivery-attempts: -1}
addresses:
  orders: {anycast: [orders]}
  prices: {multicast: []}
  dla.rej: {anycast: [dla.rej]}
"""

BROKER = None


class Capability(LinkOption):
    """The source's (receiver) or target's (sender) capabilities: 'queue', 'topic', 'shared',
    'global'."""

    def __init__(self, *caps):
        self.caps = caps

    def apply(self, link):
        t = link.source if link.is_receiver else link.target
        t.capabilities.put_array(False, Data.SYMBOL)
        t.capabilities.enter()
        for cap in self.caps:
            t.capabilities.put_symbol(symbol(cap))
        t.capabilities.exit()


def connect_as(container_id, port=None):
    """A connection whose container id is container_id (durable subscriptions are named by it)."""
    cont = Container()
    cont.container_id = container_id
    return BlockingConnection("amqp://127.0.0.1:%d" % (port or BROKER.port), timeout=10, container=cont)


def detach(c, r):
    """The link detached, not closed (a durable subscription stays), then the connection
    closed (which closes no link)."""
    r.link.detach()
    c.close()


def modified_failed(r, undeliverable=False):
    """The receiver's last delivery settled as modified with delivery-failed (or, with
    undeliverable, undeliverable-here and not delivery-failed)."""
    d = r.fetcher.unsettled.popleft()
    d.local.failed = not undeliverable
    d.local.undeliverable = undeliverable
    d.update(Delivery.MODIFIED)
    d.settle()


def connect(port=None, **kw):
    return BlockingConnection("amqp://127.0.0.1:%d" % (port or BROKER.port), timeout=10, **kw)


class Amqp(unittest.TestCase):
    def test_1_a_queue_round_trip(self):
        c = connect()
        s = c.create_sender("orders")
        bodies = [u"text", b"\x00bytes\xff", {"a": 1, "b": [1, 2]}, [1, u"two"], 42]
        for i, body in enumerate(bodies):
            s.send(Message(body=body, properties={"i": i, "s": u"x", "f": 1.5, "b": True}, durable=True,
                           priority=7, ttl=60.0, group_id=u"g1"))  # settled: accepted once the journal has it
        r = c.create_receiver("orders")
        for i, body in enumerate(bodies):
            m = r.receive(timeout=5)
            self.assertEqual(m.body, body)
            self.assertEqual(m.properties, {"i": i, "s": u"x", "f": 1.5, "b": True})
            self.assertTrue(m.durable)
            self.assertEqual(m.priority, 7)
            self.assertEqual(m.group_id, u"g1")
            self.assertEqual(m.address, u"orders")
            self.assertGreater(m.ttl, 50)
            self.assertEqual(m.delivery_count, 0)
            r.accept()
        c.close()

    def test_2_topics_by_capability_and_prefix(self):
        c = connect()
        r1 = c.create_receiver("prices", options=Capability("topic"))
        r2 = c.create_receiver("/topic/prices")
        s = c.create_sender("prices", options=Capability("topic"))
        s.send(Message(body=u"tick"))
        for r in (r1, r2):
            self.assertEqual(r.receive(timeout=5).body, u"tick")
            r.accept()
        # a queue named by the anycast prefix, made on first use
        s = c.create_sender("/queue/auto.made")
        s.send(Message(body=u"q"))
        r = c.create_receiver("auto.made", options=Capability("queue"))
        self.assertEqual(r.receive(timeout=5).body, u"q")
        r.accept()
        c.close()

    def test_3_outcomes(self):
        c = connect()
        s = c.create_sender("/queue/outcomes")
        s.send(Message(body=u"m"))
        r = c.create_receiver("/queue/outcomes")
        m = r.receive(timeout=5)
        r.release(delivered=False)  # released: back, uncounted
        m = r.receive(timeout=5)
        self.assertEqual((m.body, m.delivery_count), (u"m", 0))
        modified_failed(r)  # modified, delivery-failed: back, counted
        m = r.receive(timeout=5)
        self.assertEqual((m.body, m.delivery_count), (u"m", 1))
        r.accept()
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)  # accepted: gone
        c.close()
        # a delivery the client never settled goes back when its connection goes
        c = connect()
        c.create_sender("/queue/outcomes").send(Message(body=u"n"))
        r = c.create_receiver("/queue/outcomes")
        self.assertEqual(r.receive(timeout=5).body, u"n")
        c.close()
        c = connect()
        r = c.create_receiver("/queue/outcomes")
        m = r.receive(timeout=5)
        self.assertEqual((m.body, m.delivery_count), (u"n", 1))
        r.accept()
        c.close()

    def test_3c_undeliverable_here(self):
        """modified with undeliverable-here: the message is never given to that link again,
        as Artemis keeps it from that consumer; the link goes on with the messages after
        it, and another link takes it, uncounted."""
        c = connect()
        s = c.create_sender("/queue/undeliverable")
        s.send(Message(body=u"m1"))
        a = c.create_receiver("/queue/undeliverable", credit=10)
        self.assertEqual(a.receive(timeout=5).body, u"m1")
        modified_failed(a, undeliverable=True)
        s.send(Message(body=u"m2"))
        m = a.receive(timeout=5)
        self.assertEqual(m.body, u"m2")  # (past m1, which waits in the queue for another)
        a.accept()
        with self.assertRaises(Exception):
            a.receive(timeout=0.5)  # never m1 again
        b = connect().create_receiver("/queue/undeliverable")
        m = b.receive(timeout=5)
        self.assertEqual((m.body, m.delivery_count), (u"m1", 0))
        b.accept()
        c.close()

    def test_3b_rejected_goes_to_the_dead_letters(self):
        """rejected: to the dead-letter address at once, as Artemis's reject, whatever
        max-delivery-attempts says (here unlimited)."""
        c = connect()
        c.create_sender("/queue/rej.q").send(Message(body=u"bad", properties={"k": 1}))
        r = c.create_receiver("/queue/rej.q")
        self.assertEqual(r.receive(timeout=5).body, u"bad")
        r.reject()
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)  # not delivered again
        m = c.create_receiver("/queue/dla.rej").receive(timeout=5)
        self.assertEqual(m.body, u"bad")
        self.assertEqual((m.properties["k"], m.properties["_AMQ_ORIG_QUEUE"]), (1, u"rej.q"))
        c.close()

    def test_4_at_most_once(self):
        c = connect()
        s = c.create_sender("/queue/amo", options=AtMostOnce())
        for i in range(50):
            s.send(Message(body=u"%d" % i))
        r = c.create_receiver("/queue/amo", options=AtMostOnce(), credit=10)
        got = [r.receive(timeout=5).body for _ in range(50)]
        self.assertEqual(got, [u"%d" % i for i in range(50)])
        c.close()
        c = connect()
        r = c.create_receiver("/queue/amo")
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)  # settled as written: none comes back
        c.close()

    def test_5_selector_and_credit(self):
        c = connect()
        s = c.create_sender("/queue/sel")
        for color in ("red", "green", "red", "blue"):
            s.send(Message(body=color, properties={"color": color}))
        r = c.create_receiver("/queue/sel", options=Selector(u"color = 'red'"))
        for _ in range(2):
            self.assertEqual(r.receive(timeout=5).body, u"red")
            r.accept()
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)
        r.close()
        r = c.create_receiver("/queue/sel", credit=1)  # one at a time: the rest wait on the queue
        self.assertEqual(r.receive(timeout=5).body, u"green")
        r.accept()
        self.assertEqual(r.receive(timeout=5).body, u"blue")
        r.accept()
        c.close()

    def test_5b_no_local(self):
        """A no-local subscriber gets no message its own connection (container) sent."""
        c, other = connect_as("nl-client"), connect_as("nl-other")
        nolocal = Filter({symbol("no-local"): Described(symbol("apache.org:no-local-filter:list"), [])})
        r = c.create_receiver("nl.t", options=[Capability("topic"), nolocal], credit=10)
        c.create_sender("nl.t", options=Capability("topic")).send(Message(body=u"mine"))
        other.create_sender("nl.t", options=Capability("topic")).send(Message(body=u"theirs"))
        m = r.receive(timeout=5)
        r.accept()
        self.assertEqual(m.body, u"theirs")
        self.assertNotIn("__AMQ_CID", m.properties or {})  # (the broker's stamp, not an application property)
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)
        c.close()
        other.close()

    def test_6_to_and_from_stomp(self):
        st = stomp.Connection12([("127.0.0.1", BROKER.port)])
        got = []
        st.set_listener("l", type("L", (stomp.ConnectionListener,), {"on_message": lambda self, f: got.append(f)})())
        st.connect(wait=True)
        st.subscribe("/queue/cross.out", id="1", ack="auto")
        c = connect()
        c.create_sender("cross.out").send(Message(body=u"from amqp", properties={"k": u"v"}))
        deadline = time.time() + 5
        while not got and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual(got[0].body, "from amqp")
        self.assertEqual(got[0].headers["k"], "v")
        st.send("/queue/cross.in", "from stomp", headers={"k": "w"})
        m = c.create_receiver("cross.in").receive(timeout=5)
        self.assertEqual(m.body, b"from stomp")  # (a data section)
        self.assertEqual(m.properties["k"], u"w")
        c.close()
        st.disconnect()

    def test_6b_the_properties_section(self):
        """message-id, correlation-id, subject, reply-to, content-type and user-id: back as
        they were to AMQP, as Artemis's JMS names to STOMP."""
        c = connect()
        m = Message(body=u"p", id=u"m-1", correlation_id=42, subject=u"kind", reply_to=u"replies",
                    content_type=u"text/plain", user_id=b"anonymous",
                    annotations={symbol("x-opt-jms-msg-type"): 5, symbol("x-opt-jms-dest"): 0, symbol("x-opt-k"): u"v"})
        c.create_sender("/queue/props").send(m)
        got = c.create_receiver("/queue/props").receive(timeout=5)
        self.assertEqual(got.annotations, {symbol("x-opt-jms-msg-type"): 5, symbol("x-opt-jms-dest"): 0,
                                           symbol("x-opt-k"): u"v"})  # (kept as they came)
        self.assertEqual((got.id, got.correlation_id, got.subject, got.reply_to, got.content_type, got.user_id),
                         (u"m-1", u"42", u"kind", u"replies", u"text/plain", b"anonymous"))
        self.assertEqual(got.properties, None)  # (the fields are not application-properties)
        st = stomp.Connection12([("127.0.0.1", BROKER.port)])
        frames = []
        st.set_listener("l", type("L", (stomp.ConnectionListener,), {"on_message": lambda self, f: frames.append(f)})())
        st.connect(wait=True)
        st.subscribe("/queue/props.stomp", id="1", ack="auto")
        c.create_sender("/queue/props.stomp").send(m)
        deadline = time.time() + 5
        while not frames and time.time() < deadline:
            time.sleep(0.02)
        h = frames[0].headers
        self.assertEqual((h["JMSMessageID"], h["JMSCorrelationID"], h["JMSType"], h["JMSReplyTo"], h["content-type"]),
                         ("m-1", "42", "kind", "replies", "text/plain"))
        st.disconnect()
        c.close()

    def test_6c_each_message_its_own_sections(self):
        """A message without a header, properties or annotations, sent after one with them
        on the same link, gets none of the first's; bodies of bytes and text, short and
        long (the head views them in the transfer), come back as they were sent."""
        c = connect()
        s = c.create_sender("/queue/own")
        s.send(Message(body=u"first", id=u"m-1", subject=u"kind", durable=True, priority=9, ttl=60,
                       properties={u"colour": u"red"}, annotations={symbol("x-opt-k"): u"v"}))
        bodies = [(b"x" * 70000, True), (u"\u00e9" * 300, False), (b"ab", False), (b"", True), (u"short", False)]
        for body, inferred in bodies:
            s.send(Message(body=body, inferred=inferred))
        r = c.create_receiver("/queue/own")
        first = r.receive(timeout=5)
        r.accept()
        self.assertEqual((first.subject, first.properties, first.priority), (u"kind", {u"colour": u"red"}, 9))
        for body, inferred in bodies:
            got = r.receive(timeout=5)
            r.accept()
            self.assertEqual((got.body, got.inferred), (body, inferred))
            self.assertEqual((got.id, got.subject, got.properties, got.annotations), (None, None, None, None))
            self.assertEqual((got.durable, got.priority, got.ttl), (False, 4, 0))
        c.close()

    def test_7_refused_sends_and_links(self):
        c = connect()
        s = c.create_sender("/queue/full.q")
        s.send(Message(body=u"x" * 600))
        s.send(Message(body=u"x" * 600))  # (the address is over its 1 KiB now)
        with self.assertRaises(SendException) as e:  # rejected (FAIL)
            s.send(Message(body=u"y" * 600))
        self.assertEqual(e.exception.state, Delivery.REJECTED)
        with self.assertRaises(LinkDetached):  # no address to receive from
            c.create_receiver(None, dynamic=False)
        c.close()

    def test_8_hostile_input(self):
        # bytes that are not AMQP after the header, a frame over max-frame-size, a bad
        # protocol id: each connection closed, the broker serving on
        big = b"AMQP\x00\x01\x00\x00" + (200000).to_bytes(4, "big") + b"\x02\x00\x00\x00"
        for data in (b"AMQP\x00\x01\x00\x00garbage-garbage-garbage", big):
            s, got = raw(BROKER.port, data, timeout=3)
            self.assertIn(b"amqp:connection:framing-error", got, data[:20])  # (the close's condition)
            s.close()
        s, got = raw(BROKER.port, b"AMQP\x09\x01\x00\x00", timeout=3)  # no such protocol id: closed
        s.close()
        self.assertTrue(BROKER.alive())
        # a client that goes mid-frame
        s = socket.create_connection(("127.0.0.1", BROKER.port))
        s.sendall(b"AMQP\x00\x01\x00\x00\x00\x00\x01\x00")
        s.close()
        c = connect()
        c.create_sender("/queue/alive").send(Message(body=u"still here"))
        self.assertEqual(c.create_receiver("/queue/alive").receive(timeout=5).body, u"still here")
        c.close()

    def test_8b_silent_clients_and_floods(self):
        """A client silent past the idle timeout is closed with amqp:resource-limit-exceeded;
        a link past the connection's 1024 is refused with the same; a channel past 255 closes
        the connection (Proton's framing error); the broker serves on."""
        other = Mqrd(sys.argv[1], CONFIG.replace("protocols: [mqr, stomp, amqp]",
                                                 "protocols: [mqr, stomp, amqp]\n    idle-timeout: 1s"))
        try:
            body = b"\x00\x53\x10\xc0\x04\x01\xa1\x01x"  # open, container-id "x"
            frame = (8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body
            s = socket.create_connection(("127.0.0.1", other.port), timeout=10)
            s.sendall(b"AMQP\x00\x01\x00\x00" + frame)
            got, start = b"", time.time()
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
            self.assertIn(b"amqp:resource-limit-exceeded", got)
            self.assertLess(time.time() - start, 5)
            s.close()
            # a begin on channel 300 (over channel-max 255)
            begin = b"\x00\x53\x11\xc0\x0e\x04\x40\x52\x00\x70\x00\x00\x00\x64\x70\x00\x00\x00\x64"
            frame2 = (8 + len(begin)).to_bytes(4, "big") + b"\x02\x00\x01\x2c" + begin
            s, got = raw(other.port, b"AMQP\x00\x01\x00\x00" + frame + frame2, timeout=3)
            s.close()
            self.assertIn(b"amqp:connection:framing-error", got)
            self.assertIn(b"above negotiated channel_max 255", got)
            self.assertTrue(other.alive())
        finally:
            self.assertEqual(other.stop(), 0)
        c = connect()
        links = []
        with self.assertRaises(LinkDetached) as e:
            for i in range(1100):
                links.append(c.create_receiver("/queue/flood", name="l%d" % i))
        self.assertIn("resource-limit-exceeded", str(e.exception))
        self.assertEqual(len(links), 1024)
        c.close()
        self.assertTrue(BROKER.alive())

    def test_8c_transfers_past_the_credit(self):
        """A client that sends past the link credit it was given has its link detached with
        amqp:link:transfer-limit-exceeded: to a full BLOCK address, whose links get no more
        credit, 1100 transfers on the 1000 given; what came within it was sent, and the
        broker serves on."""
        def described(code, items):
            body = bytes([len(items)]) + b"".join(items)
            return b"\x00\x53" + bytes([code]) + b"\xc0" + bytes([len(body)]) + body

        def frame(body):
            return (8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body

        address = b"/queue/blocked.abuse"
        out = b"AMQP\x00\x01\x00\x00" + frame(described(0x10, [b"\xa1\x01x"]))  # open
        out += frame(described(0x11, [b"\x40", b"\x43", b"\x70\x00\x01\x00\x00", b"\x70\x00\x01\x00\x00"]))  # begin
        target = b"\x00\x53\x29\xc0" + bytes([len(address) + 3, 1]) + b"\xa1" + bytes([len(address)]) + address
        out += frame(described(0x12, [b"\xa1\x01l", b"\x43", b"\x42", b"\x50\x01", b"\x40", b"\x00\x53\x28\x45",
                                      target, b"\x40", b"\x40", b"\x43"]))  # attach: a sender, settled
        s = socket.create_connection(("127.0.0.1", BROKER.port), timeout=10)
        s.sendall(out)
        got = b""
        while b"\x00\x53\x13" not in got:  # (the broker's begin and attach, then its flow: the credit)
            got += s.recv(65536)
        out = b""
        for i in range(1100):  # transfer, settled, with an amqp-value "x"
            out += frame(described(0x14, [b"\x43", b"\x70" + i.to_bytes(4, "big"), b"\xa0\x04" + i.to_bytes(4, "big"),
                                          b"\x43", b"\x41"]) + b"\x00\x53\x77\xa1\x01x")
        s.sendall(out)
        s.settimeout(3)
        try:
            while b"transfer-limit-exceeded" not in got:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except socket.timeout:
            pass
        s.close()
        self.assertIn(b"amqp:link:transfer-limit-exceeded", got)
        c = connect()
        r = c.create_receiver("/queue/blocked.abuse", credit=1100)
        n = 0
        try:
            while True:
                r.receive(timeout=1)
                r.accept()
                n += 1
        except Exception:
            pass
        self.assertEqual(n, 1000)
        c.close()
        self.assertTrue(BROKER.alive())

    def test_9_anonymous_refused(self):
        other = Mqrd(sys.argv[1], CONFIG.replace("allow-anonymous: true", "allow-anonymous: false"))
        try:
            with self.assertRaises(ConnectionException):
                BlockingConnection("amqp://127.0.0.1:%d" % other.port, timeout=5).create_sender("orders")
            self.assertIn("anonymous client", other.log_text())
        finally:
            self.assertEqual(other.stop(), 0)


class Subscriptions(unittest.TestCase):
    def test_1_durable_subscription(self):
        """Qpid JMS's durable subscriber: the queue container.link, kept while the link is
        detached, gone when it is closed."""
        c = connect_as("jms-client")
        r = c.create_receiver("news", name="sub1", options=[DurableSubscription(), Capability("topic")])
        detach(c, r)
        p = connect()
        s = p.create_sender("news", options=Capability("topic"))
        for i in range(3):
            s.send(Message(body=u"n%d" % i, durable=True))
        p.close()
        c = connect_as("jms-client")
        r = c.create_receiver("news", name="sub1", options=[DurableSubscription(), Capability("topic")])
        got = []
        for _ in range(3):
            got.append(r.receive(timeout=5).body)
            r.accept()
        self.assertEqual(got, [u"n0", u"n1", u"n2"])
        detach(c, r)
        # Qpid JMS's unsubscribe: a link of the subscription's name with no source address
        # finds it (the answer's source names its address), and closing it removes it
        c = connect_as("jms-client")
        r = c.create_receiver(None, name="sub1")
        self.assertEqual((r.remote_source.address, r.remote_source.durability), (u"news", 2))
        r.close()  # closed: unsubscribed
        c.close()
        c = connect_as("jms-client")
        with self.assertRaises(LinkDetached):
            c.create_receiver(None, name="sub1")  # gone
        c.close()
        p = connect()
        p.create_sender("news", options=Capability("topic")).send(Message(body=u"after"))
        p.close()
        c = connect_as("jms-client")
        r = c.create_receiver("news", name="sub1", options=[DurableSubscription(), Capability("topic")])
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)  # a new subscription: nothing from before it
        c.close()

    def test_2_shared_and_global_subscriptions(self):
        """Shared subscribers of one name split the messages; global-shared ones across
        containers."""
        a, b = connect_as("ca"), connect_as("cb")
        ra = a.create_receiver("shared.t", name="s1", options=Capability("topic", "shared", "global"), credit=20)
        rb = b.create_receiver("shared.t", name="s1", options=Capability("topic", "shared", "global"), credit=20)
        p = connect()
        s = p.create_sender("shared.t", options=Capability("topic"))
        for i in range(20):
            s.send(Message(body=u"%d" % i))
        got = []
        for r in (ra, rb):
            while True:
                try:
                    got.append(r.receive(timeout=0.5).body)
                    r.accept()
                except Exception:
                    break
        self.assertEqual(sorted(got, key=int), [u"%d" % i for i in range(20)])
        for conn in (a, b, p):
            conn.close()

    def test_3_dynamic_node_for_replies(self):
        """A dynamic source: a temporary queue named by the broker, for request/reply."""
        c = connect()
        r = c.create_receiver(None, dynamic=True)
        reply_to = r.remote_source.address
        self.assertTrue(reply_to.startswith("amqp.dynamic."), reply_to)
        c.create_sender(reply_to).send(Message(body=u"reply"))
        self.assertEqual(r.receive(timeout=5).body, u"reply")
        r.accept()
        c.close()

    def test_4_durable_subscription_across_a_restart(self):
        data = tempfile.mkdtemp(prefix="mqr-amqp-data-")
        b = Mqrd(sys.argv[1], CONFIG + "persistence: {directory: %s}\n" % data)
        try:
            c = connect_as("restart-client", b.port)
            r = c.create_receiver("events", name="keep", options=[DurableSubscription(), Capability("topic")])
            detach(c, r)
            c = connect(b.port)
            c.create_sender("events", options=Capability("topic")).send(Message(body=u"kept", durable=True))
            c.close()
            self.assertEqual(b.stop(), 0)
            b.start()
            c = connect_as("restart-client", b.port)
            r = c.create_receiver("events", name="keep", options=[DurableSubscription(), Capability("topic")])
            self.assertEqual(r.receive(timeout=5).body, u"kept")
            r.accept()
            c.close()
        finally:
            self.assertEqual(b.stop(), 0)
            shutil.rmtree(data, ignore_errors=True)


class SubscriptionFilters(unittest.TestCase):
    def test_1_the_selector_is_the_subscriptions_filter(self):
        """A durable subscription's selector is its queue's filter, as Artemis makes it: what
        it does not match is not kept for it. Attached again with another selector while
        it has a consumer: refused; with none, the subscription is made anew, what it held
        going with the old one."""
        mqr = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "cli", "mqr")
        url = "tcp://127.0.0.1:%d" % BROKER.port

        def attach(c, selector):
            return c.create_receiver("weather", name="sel-sub",
                                     options=[DurableSubscription(), Capability("topic"), Selector(selector)])

        c = connect_as("sel-client")
        detach(c, attach(c, u"kind = 'rain'"))
        p = connect()
        s = p.create_sender("weather", options=Capability("topic"))
        for kind in (u"sun", u"rain", u"sun"):
            s.send(Message(body=kind, properties={u"kind": kind}, durable=True))
        held = run_mqr(mqr, "queue", "--url", url, "--json", "browse", "sel-client.sel-sub").stdout.strip().splitlines()
        self.assertEqual(len(held), 1, held)  # the rain alone
        c = connect_as("sel-client")
        r = attach(c, u"kind = 'rain'")
        self.assertEqual(r.receive(timeout=5).body, u"rain")
        r.accept()
        other = connect_as("sel-client")
        with self.assertRaises(LinkDetached) as e:
            attach(other, u"kind = 'sun'")
        self.assertIn("amqp:illegal-state", str(e.exception))
        self.assertIn("another selector", str(e.exception))
        other.close()
        detach(c, r)
        s.send(Message(body=u"rain", properties={u"kind": u"rain"}, durable=True))  # held for the old one
        c = connect_as("sel-client")
        r = attach(c, u"kind = 'sun'")
        s.send(Message(body=u"sun", properties={u"kind": u"sun"}, durable=True))
        self.assertEqual(r.receive(timeout=5).body, u"sun")  # (not the rain the old one held)
        r.accept()
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)
        r.close()  # (unsubscribed)
        c.close()
        p.close()


class Management(unittest.TestCase):
    """Artemis's management messages: a request to activemq.management, answered on its
    reply-to with _AMQ_OperationSucceeded and a JSON array of the result."""

    def ask(self, c, replies, resource, operation=None, attribute=None, params=None, id=u"req-1"):
        if not hasattr(c, "management"):  # (one link: Proton names a link by its container and address)
            c.management = c.create_sender("activemq.management")
        props = {u"_AMQ_ResourceName": resource}
        if operation:
            props[u"_AMQ_OperationName"] = operation
        if attribute:
            props[u"_AMQ_Attribute"] = attribute
        c.management.send(
            Message(body=json.dumps(params or []), id=id, reply_to=replies.link.remote_source.address,
                    properties=props))
        m = replies.receive(timeout=5)
        replies.accept()
        return m.properties[u"_AMQ_OperationSucceeded"], json.loads(m.body), m.correlation_id

    def test_1_queues_and_addresses(self):
        c = connect()
        replies = c.create_receiver(None, dynamic=True)
        ok, body, corr = self.ask(c, replies, u"broker", u"createQueue",
                                  params=[json.dumps({"name": "mq1", "address": "mq1", "routing-type": "ANYCAST",
                                                      "durable": False})], id=u"make-mq1")
        self.assertEqual((ok, body, corr), (True, [None], u"make-mq1"))
        self.assertEqual(self.ask(c, replies, u"broker", u"createQueue", params=["mq2", "ANYCAST", "mq2", "", False])[:2],
                         (True, [None]))
        s = c.create_sender("mq1")
        for i in range(3):
            s.send(Message(body=u"m%d" % i))
        self.assertEqual(self.ask(c, replies, u"queue.mq1", attribute=u"messageCount")[:2], (True, [3]))
        ok, body, _ = self.ask(c, replies, u"broker", u"getQueueNames")
        self.assertTrue(ok and "mq1" in body[0] and "mq2" in body[0], body)
        self.assertEqual(self.ask(c, replies, u"queue.mq1", u"pause")[:2], (True, [None]))
        self.assertEqual(self.ask(c, replies, u"queue.mq1", attribute=u"paused")[:2], (True, [True]))
        self.assertEqual(self.ask(c, replies, u"queue.mq1", u"resume")[:2], (True, [None]))
        self.assertEqual(self.ask(c, replies, u"queue.mq1", u"moveMessages", params=["", "mq2"])[:2], (True, [3]))
        self.assertEqual(self.ask(c, replies, u"queue.mq2", u"countMessages")[:2], (True, [3]))
        self.assertEqual(self.ask(c, replies, u"address.mq2", attribute=u"queueNames")[:2], (True, [["mq2"]]))
        self.assertEqual(self.ask(c, replies, u"queue.mq2", u"removeAllMessages")[:2], (True, [3]))
        self.assertEqual(self.ask(c, replies, u"queue.mq2", attribute=u"messageCount")[:2], (True, [0]))
        self.assertEqual(self.ask(c, replies, u"broker", u"destroyQueue", params=["mq1"])[:2], (True, [None]))
        ok, body, _ = self.ask(c, replies, u"queue.mq1", attribute=u"messageCount")
        self.assertFalse(ok)
        self.assertIn("does not exist", body[0])
        ok, body, _ = self.ask(c, replies, u"queue.mq2", u"explode")
        self.assertFalse(ok)
        self.assertIn("no operation", body[0])
        ok, body, _ = self.ask(c, replies, u"nothing", u"getQueueNames")
        self.assertFalse(ok)
        c.close()

    def test_2_manage_is_needed(self):
        """Without manage on activemq.management: the link to it refused at attach, and a
        request through the anonymous relay rejected, both amqp:unauthorized-access."""
        other = Mqrd(sys.argv[1], CONFIG.replace(
            "security: {allow-anonymous: true}",
            "security:\n  allow-anonymous: true\n  anonymous-roles: [guest]\n  security-settings:\n"
            "    '#': {send: [guest], consume: [guest], create-non-durable-queue: [guest], create-address: [guest]}"))
        try:
            c = connect(other.port)
            with self.assertRaises(LinkDetached) as e:
                c.create_sender("activemq.management")
            self.assertIn("unauthorized-access", str(e.exception))
            relay = c.create_sender(None)
            m = Message(body=u"[]", address=u"activemq.management",
                        properties={u"_AMQ_ResourceName": u"broker", u"_AMQ_OperationName": u"getQueueNames"})
            with self.assertRaises(SendException) as e:
                relay.send(m)
            self.assertEqual(e.exception.state, Delivery.REJECTED)
            c.close()
        finally:
            self.assertEqual(other.stop(), 0)


class TxClient(MessagingHandler, TransactionHandler):
    """A client of one connection that declares a transaction (link: its link on the
    connection), then commits or aborts it: .done says how it ended."""

    def __init__(self, address, n, commit, **kw):
        super(TxClient, self).__init__(**kw)
        self.address, self.n, self.commit, self.done = address, n, commit, None

    def on_start(self, event):
        self.conn = event.container.connect("amqp://127.0.0.1:%d" % BROKER.port)
        self.link(event.container)
        event.container.declare_transaction(self.conn, handler=self)
        self.timer = event.container.schedule(10, self)  # (a hang is a failure, not a stuck test)

    def on_timer_task(self, event):
        if self.done is None:
            self.done = "timed out"
            self.conn.close()

    def discharge(self, txn):
        txn.commit() if self.commit else txn.abort()

    def end(self, how):
        self.done = how
        self.timer.cancel()
        self.conn.close()

    def on_transaction_committed(self, event):
        self.end("committed")

    def on_transaction_aborted(self, event):
        self.end("aborted")

    def on_transaction_commit_failed(self, event):
        self.end("commit failed")


class TxSend(TxClient):
    """Sends n messages in a transaction, then commits it (or aborts it)."""

    def link(self, container):
        self.sender = container.create_sender(self.conn, self.address)

    def on_transaction_declared(self, event):
        for i in range(self.n):
            event.transaction.send(self.sender, Message(body=u"t%d" % i, durable=True))
        self.discharge(event.transaction)


class TxReceive(TxClient):
    """Receives n messages and accepts them in a transaction, then commits or aborts it."""

    def __init__(self, address, n, commit):
        super(TxReceive, self).__init__(address, n, commit, prefetch=0, auto_accept=False)
        self.got = []

    def link(self, container):
        self.receiver = container.create_receiver(self.conn, self.address)

    def on_transaction_declared(self, event):
        self.txn = event.transaction
        self.receiver.flow(self.n)

    def on_message(self, event):
        self.got.append(event.message.body)
        self.txn.accept(event.delivery)
        if len(self.got) == self.n:
            self.discharge(self.txn)


class Transactions(unittest.TestCase):
    def run_handler(self, h):
        Container(h).run()
        return h.done

    def test_1_sends_committed_and_rolled_back(self):
        self.assertEqual(self.run_handler(TxSend("/queue/tx.s", 2, commit=False)), "aborted")
        self.assertEqual(self.run_handler(TxSend("/queue/tx.s", 3, commit=True)), "committed")
        c = connect()
        r = c.create_receiver("/queue/tx.s")
        got = []
        for _ in range(3):
            got.append(r.receive(timeout=5).body)
            r.accept()
        self.assertEqual(got, [u"t0", u"t1", u"t2"])  # the aborted two never went
        with self.assertRaises(Exception):
            r.receive(timeout=0.5)
        c.close()

    def test_2_acknowledgements_committed_and_rolled_back(self):
        c = connect()
        s = c.create_sender("/queue/tx.r")
        for i in range(2):
            s.send(Message(body=u"r%d" % i))
        c.close()
        h = TxReceive("/queue/tx.r", 2, commit=False)
        self.assertEqual(self.run_handler(h), "aborted")
        self.assertEqual(h.got, [u"r0", u"r1"])
        h = TxReceive("/queue/tx.r", 2, commit=True)  # back after the rollback: again, counted
        self.assertEqual(self.run_handler(h), "committed")
        self.assertEqual(h.got, [u"r0", u"r1"])
        c = connect()
        with self.assertRaises(Exception):
            c.create_receiver("/queue/tx.r").receive(timeout=0.5)  # acknowledged by the commit
        c.close()


if __name__ == "__main__":
    run_suite(CONFIG, sys.modules[__name__])
