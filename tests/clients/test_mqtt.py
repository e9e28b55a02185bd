"""MQTT 3.1.1 and 5.0 against a real mqrd with Debian's python3-paho-mqtt and
mosquitto_pub/mosquitto_sub: QoS 0, 1 and 2 both ways, wildcards, retained messages and
5.0's retain handling, wills (and their delay), keep-alive, persistent sessions resumed
after a reconnect, session takeover, shared subscriptions, no-local, 5.0 properties,
topic aliases, subscription identifiers; then malformed and hostile packets on raw
sockets, each closing its connection as the specification says while the broker and its
other clients go on.

usage: test_mqtt.py MQRD"""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, held_by_tcp, raw, raw_closed, reset, run_suite, wait_for  # noqa: E402

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - name: main
    port: 0
    protocols: [mqtt, stomp, mqr]
    mqtt: {max-packet-size: 64KiB}
  - name: strict
    port: 0
    protocols: [mqtt]
    mqtt: {receive-maximum: 2, server-keep-alive: 7, topic-alias-maximum: 0}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
  'test.nosubscribe': {auto-create-queues: false}
  'blk.#': {max-size-bytes: 16KiB, address-full-policy: BLOCK}
"""

BROKER = None
V3, V5 = mqtt.MQTTv311, mqtt.MQTTv5


def pkt(first, body):
    return bytes([first, len(body)]) + body


def string(t):
    return struct.pack(">H", len(t)) + t


def raw_connect(test, port, cid):
    """A 3.1.1 client on a raw socket, clean session off; (socket, session present)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(pkt(0x10, b"\x00\x04MQTT\x04\x00\x00\x3c" + string(cid)))  # clean session off
    got = s.recv(4)
    test.assertEqual(got[:3], b"\x20\x02" + got[2:3])
    return s, got[2]


def read_packets(s, wait=1.0):
    """The packets that came within wait seconds: (type, flags, body) each."""
    s.settimeout(wait)
    buf = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        pass
    out, i = [], 0
    while i + 2 <= len(buf):
        n = buf[i + 1]
        out.append((buf[i] >> 4, buf[i] & 15, buf[i + 2:i + 2 + n]))
        i += 2 + n
    return out


class Client:
    """A paho client on its own loop thread, recording what it gets."""

    def __init__(self, cid, proto=V5, clean=True, will=None, keepalive=60, props=None, expiry=None):
        self.messages, self.lock = [], threading.Lock()
        self.connack, self.disconnect_rc = None, None
        kw = {} if proto == V5 else {"clean_session": clean}
        self.c = mqtt.Client(client_id=cid, protocol=proto, **kw)
        self.c.on_message = self._on_message
        self.c.on_connect = self._on_connect
        self.c.on_disconnect = self._on_disconnect
        if will:
            self.c.will_set(*will)
        cp = None
        if proto == V5:
            cp = props or Properties(PacketTypes.CONNECT)
            if expiry is not None:
                cp.SessionExpiryInterval = expiry
        ckw = {"clean_start": clean, "properties": cp} if proto == V5 else {}
        self.c.connect("127.0.0.1", BROKER.port, keepalive=keepalive, **ckw)
        self.c.loop_start()
        assert wait_for(lambda: self.connack is not None), "no CONNACK"

    def _on_connect(self, c, u, flags, rc, props=None):
        self.connack = (flags.get("session present", 0), rc)

    def _on_disconnect(self, c, u, rc, props=None):
        self.disconnect_rc = rc

    def _on_message(self, c, u, m):
        with self.lock:
            self.messages.append(m)

    def wait(self, n, timeout=5.0):
        wait_for(lambda: len(self.messages) >= n, timeout)
        return self.messages

    def sub(self, topic, qos=1, options=None, props=None):
        if options is not None:
            rc, mid = self.c.subscribe(topic, options=options, properties=props)
        else:
            rc, mid = self.c.subscribe(topic, qos)
        time.sleep(0.2)
        return rc

    def pub(self, topic, payload, qos=0, retain=False, props=None):
        info = self.c.publish(topic, payload, qos=qos, retain=retain, properties=props)
        if qos:
            info.wait_for_publish(5)
        return info

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()

    def drop(self):
        """Gone without DISCONNECT: the socket closed under it."""
        self.c.loop_stop()
        self.c.socket().close()


def bodies(ms):
    return [m.payload.decode() for m in ms]


class Mqtt(unittest.TestCase):
    def test_qos_both_ways(self):
        for proto in (V3, V5):
            for sq in (0, 1, 2):
                sub = Client("q-sub-%d-%d" % (proto, sq), proto)
                sub.sub("qos/t", sq)
                pub = Client("q-pub-%d-%d" % (proto, sq), proto)
                for pq in (0, 1, 2):
                    pub.pub("qos/t", "m%d" % pq, pq)
                got = sub.wait(3)
                time.sleep(0.2)
                self.assertEqual(bodies(got), ["m0", "m1", "m2"], (proto, sq))
                # Delivered at the lower of the two.
                self.assertEqual([m.qos for m in got], [min(sq, pq) for pq in (0, 1, 2)])
                sub.close()
                pub.close()

    def test_wildcards(self):
        sub = Client("wild")
        sub.sub("w/+/x", 1)
        sub.sub("w/deep/#", 1)
        pub = Client("wild-pub")
        for t in ("w/a/x", "w/a/y", "w/deep", "w/deep/1/2", "w/a/b/x"):
            pub.pub(t, t, 1)
        got = sub.wait(3)
        time.sleep(0.3)
        self.assertEqual(sorted(m.topic for m in got), ["w/a/x", "w/deep", "w/deep/1/2"])
        # '#' does not match a topic that starts with '$' [MQTT-4.7.2-1].
        all_ = Client("all")
        all_.sub("#", 0)
        pub.pub("$dollar/x", "d", 1)
        pub.pub("plain/x", "p", 1)
        time.sleep(0.4)
        self.assertNotIn("$dollar/x", [m.topic for m in all_.messages])
        self.assertIn("plain/x", [m.topic for m in all_.messages])
        for c in (sub, pub, all_):
            c.close()

    def test_retained(self):
        pub = Client("ret-pub")
        pub.pub("ret/b", "bee", 0, retain=True)  # (QoS 0 first: the PUBACKs after it say it is stored)
        pub.pub("ret/a", "first", 1, retain=True)
        pub.pub("ret/a", "second", 1, retain=True)  # replaces it
        sub = Client("ret-sub", V3)
        sub.sub("ret/+", 1)
        got = sub.wait(2)
        time.sleep(0.3)
        self.assertEqual(sorted((m.topic, m.payload, m.retain) for m in got),
                         [("ret/a", b"second", 1), ("ret/b", b"bee", 1)])
        pub.pub("ret/a", "live", 1, retain=True)  # to a subscriber already there: retain 0
        live = sub.wait(3)[-1]
        self.assertEqual((live.payload, live.retain), (b"live", 0))
        pub.pub("ret/a", b"", 1, retain=True)  # clears it
        time.sleep(0.2)
        s2 = Client("ret-sub2")
        s2.sub("ret/a", 1)
        time.sleep(0.3)
        self.assertEqual(s2.messages, [])
        # 5.0 retain handling: 2 sends none; 1 only for a new subscription; 0 every time.
        pub.pub("ret/h", "h", 1, retain=True)
        s3 = Client("ret-sub3")
        s3.sub("ret/h", options=SubscribeOptions(qos=1, retainHandling=2))
        time.sleep(0.3)
        self.assertEqual(s3.messages, [])
        s3.sub("ret/h", options=SubscribeOptions(qos=1, retainHandling=1))  # not new: none
        time.sleep(0.3)
        self.assertEqual(s3.messages, [])
        s3.sub("ret/h", options=SubscribeOptions(qos=1, retainHandling=0))
        self.assertEqual(bodies(s3.wait(1)), ["h"])
        # retain-as-published keeps the flag on a live message.
        s4 = Client("ret-sub4")
        s4.sub("ret/rap", options=SubscribeOptions(qos=1, retainAsPublished=True, retainHandling=2))
        pub.pub("ret/rap", "r", 1, retain=True)
        self.assertEqual(s4.wait(1)[0].retain, 1)
        for c in (pub, sub, s2, s3, s4):
            c.close()

    def test_wills(self):
        for proto in (V3, V5):
            watcher = Client("will-watch-%d" % proto)
            watcher.sub("will/#", 1)
            gone = Client("will-gone-%d" % proto, proto, will=("will/%d" % proto, "died", 1, False))
            gone.drop()
            got = watcher.wait(1)
            self.assertEqual([(m.topic, m.payload) for m in got], [("will/%d" % proto, b"died")])
            polite = Client("will-polite-%d" % proto, proto, will=("will/%d" % proto, "never", 1, False))
            polite.close()
            time.sleep(0.4)
            self.assertEqual(len(watcher.messages), 1)
            watcher.close()
        # 5.0 will delay: a reconnect within it cancels the will; without, it goes late.
        watcher = Client("will-watch-d")
        watcher.sub("willd/#", 1)
        wp = Properties(PacketTypes.WILLMESSAGE)
        wp.WillDelayInterval = 2
        c = mqtt.Client(client_id="will-delay", protocol=V5)
        c.will_set("willd/x", "late", 1, False, properties=wp)
        cp = Properties(PacketTypes.CONNECT)
        cp.SessionExpiryInterval = 60
        c.connect("127.0.0.1", BROKER.port, clean_start=True, properties=cp)
        c.loop_start()
        time.sleep(0.3)
        c.loop_stop()
        c.socket().close()
        time.sleep(0.8)
        self.assertEqual(watcher.messages, [])
        again = Client("will-delay", V5, clean=False, expiry=60)  # back in time: no will
        time.sleep(2.5)
        self.assertEqual(watcher.messages, [])
        again.drop()  # this connection had no will
        c = mqtt.Client(client_id="will-delay2", protocol=V5)
        c.will_set("willd/y", "late", 1, False, properties=wp)
        c.connect("127.0.0.1", BROKER.port, clean_start=True, properties=cp)
        c.loop_start()
        time.sleep(0.3)
        c.loop_stop()
        c.socket().close()
        t0 = time.time()
        got = watcher.wait(1, 6)
        self.assertEqual(bodies(got), ["late"])
        self.assertGreater(time.time() - t0, 1.5)
        watcher.close()

    def test_keep_alive(self):
        watcher = Client("ka-watch")
        watcher.sub("ka/#", 1)
        # A CONNECT with keep-alive 1 s and a will, then silence: closed after 1.5 s.
        topic, payload = b"ka/x", b"silent"
        vh = b"\x00\x04MQTT\x04" + bytes([0x02 | 0x04 | 0x08]) + struct.pack(">H", 1)
        pl = struct.pack(">H", 2) + b"ka" + struct.pack(">H", len(topic)) + topic + struct.pack(">H", len(payload)) + payload
        body = vh + pl
        s = socket.create_connection(("127.0.0.1", BROKER.port))
        s.sendall(bytes([0x10, len(body)]) + body)
        self.assertEqual(s.recv(4), b"\x20\x02\x00\x00")
        t0 = time.time()
        s.settimeout(5)
        self.assertEqual(s.recv(10), b"")  # closed
        elapsed = time.time() - t0
        self.assertGreater(elapsed, 1.2)  # not before one and a half keep-alives
        self.assertLess(elapsed, 10.0)  # and not never (a loaded machine may be slow to say so)
        self.assertEqual(bodies(watcher.wait(1)), ["silent"])
        s.close()
        watcher.close()

    def test_persistent_sessions(self):
        # 3.1.1: clean session off keeps the subscription and what came meanwhile.
        c = Client("persist3", V3, clean=False)
        c.sub("persist/3", 1)
        c.close()
        p = Client("persist-pub")
        p.pub("persist/3", "while away", 1)
        p.pub("persist/3", "q0 too", 0)
        c = Client("persist3", V3, clean=False)
        self.assertEqual(c.connack[0], 1)  # session present
        self.assertEqual(bodies(c.wait(2)), ["while away", "q0 too"])
        c.close()
        c = Client("persist3", V3, clean=True)  # a clean session ends it
        self.assertEqual(c.connack[0], 0)
        c.close()
        p.pub("persist/3", "nobody", 1)
        c = Client("persist3", V3, clean=False)
        self.assertEqual(c.connack[0], 0)
        time.sleep(0.3)
        self.assertEqual(c.messages, [])
        c.close()
        # 5.0: session expiry.
        c = Client("persist5", V5, clean=True, expiry=1)
        c.sub("persist/5", 2)
        c.close()
        p.pub("persist/5", "kept", 2)
        c = Client("persist5", V5, clean=False, expiry=1)
        self.assertEqual(c.connack[0], 1)
        self.assertEqual(bodies(c.wait(1)), ["kept"])
        c.close()
        time.sleep(1.8)  # past its expiry
        c = Client("persist5", V5, clean=False)
        self.assertEqual(c.connack[0], 0)
        c.close()
        p.close()

    def test_takeover(self):
        first = Client("same-id", V5)
        second = Client("same-id", V5)
        self.assertTrue(wait_for(lambda: first.disconnect_rc is not None))
        self.assertEqual(first.disconnect_rc, 142)  # 0x8E Session taken over
        second.close()
        first.c.loop_stop()

    def test_shared_subscriptions(self):
        a, b = Client("share-a"), Client("share-b")
        a.sub("$share/g/jobs/#", 1)
        b.sub("$share/g/jobs/#", 1)
        p = Client("share-pub")
        for i in range(10):
            p.pub("jobs/%d" % i, str(i), 1)
        wait_for(lambda: len(a.messages) + len(b.messages) >= 10)
        time.sleep(0.3)
        self.assertEqual(sorted(bodies(a.messages) + bodies(b.messages), key=int), [str(i) for i in range(10)])
        self.assertTrue(a.messages and b.messages)  # taken in turns
        for c in (a, b, p):
            c.close()

    def test_no_local_and_properties(self):
        c = Client("props")
        c.sub("nl/t", options=SubscribeOptions(qos=1, noLocal=True))
        other = Client("props-other")
        other.sub("pp/t", 1, props=None)
        sp = Properties(PacketTypes.SUBSCRIBE)
        sp.SubscriptionIdentifier = 42
        other.sub("pp/#", options=SubscribeOptions(qos=1), props=sp)
        c.pub("nl/t", "mine", 1)
        time.sleep(0.4)
        self.assertEqual(c.messages, [])  # no-local
        pp = Properties(PacketTypes.PUBLISH)
        pp.UserProperty = [("color", "red"), ("size", "9")]
        pp.ContentType = "text/plain"
        pp.ResponseTopic = "pp/reply"
        pp.CorrelationData = b"\x01\x02"
        pp.MessageExpiryInterval = 3600
        c.pub("pp/t", "with props", 1, props=pp)
        got = other.wait(2)
        time.sleep(0.2)
        m = [x for x in got if 42 in getattr(x.properties, "SubscriptionIdentifier", [])][0]
        self.assertEqual(dict(m.properties.UserProperty), {"color": "red", "size": "9"})
        self.assertEqual(m.properties.ContentType, "text/plain")
        self.assertEqual(m.properties.ResponseTopic, "pp/reply")
        self.assertEqual(m.properties.CorrelationData, b"\x01\x02")
        self.assertTrue(3500 < m.properties.MessageExpiryInterval <= 3600)
        # A topic alias: set with the topic, then used alone.
        ap = Properties(PacketTypes.PUBLISH)
        ap.TopicAlias = 3
        c.pub("pp/alias", "set", 1, props=ap)
        c.pub("", "used", 1, props=ap)
        got = other.wait(4)
        self.assertEqual([(m.topic, m.payload) for m in got[-2:]], [("pp/alias", b"set"), ("pp/alias", b"used")])
        c.close()
        other.close()

    def test_receive_maximum_and_server_keep_alive(self):
        """A listener's receive-maximum and server-keep-alive are sent in a 5.0 CONNACK; a
        client past the Receive Maximum is disconnected with 0x93 [MQTT-3.3.4-7]."""
        import re
        port = int(re.search(r"listener 'strict' on 127\.0\.0\.1:(\d+)", BROKER.log_text()).group(1))
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        # 5.0 CONNECT, clean start, keep-alive 60, no properties, client id "rm".
        s.sendall(pkt(0x10, b"\x00\x04MQTT\x05\x02\x00\x3c\x00" + string(b"rm")))
        ack = read_packets(s, 0.5)[0]
        self.assertEqual(ack[0], 2)
        props = ack[2][3:]  # flags, reason, properties length, then the properties
        self.assertIn(b"\x21\x00\x02", props)  # Receive Maximum 2
        self.assertIn(b"\x13\x00\x07", props)  # Server Keep Alive 7
        self.assertIn(b"\x22\x00\x00", props)  # Topic Alias Maximum 0
        # QoS 2 PUBLISHes left open (no PUBREL): two are taken, the third is one too many.
        for pid in (1, 2):
            s.sendall(pkt(0x34, string(b"rm/t") + struct.pack(">H", pid) + b"\x00m"))
            self.assertEqual(read_packets(s, 0.5)[0][:2], (5, 0))  # PUBREC
        s.sendall(pkt(0x34, string(b"rm/t") + b"\x00\x03\x00m"))
        got = read_packets(s, 1.0)
        self.assertEqual(got[-1][0], 14)  # DISCONNECT
        self.assertEqual(got[-1][2][:1], b"\x93")  # Receive Maximum exceeded
        s.close()
        # With PUBREL/PUBCOMP in between, any number go through.
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(pkt(0x10, b"\x00\x04MQTT\x05\x02\x00\x3c\x00" + string(b"rm2")))
        read_packets(s, 0.5)
        for pid in range(1, 6):
            s.sendall(pkt(0x34, string(b"rm/t") + struct.pack(">H", pid) + b"\x00m"))
            self.assertEqual(read_packets(s, 0.5)[0][:2], (5, 0))
            s.sendall(bytes([0x62, 2]) + struct.pack(">H", pid))  # PUBREL
            self.assertEqual(read_packets(s, 0.5)[0][:2], (7, 0))  # PUBCOMP
        s.close()

    def test_topic_aliases_to_the_client(self):
        """A 5.0 client that allows topic aliases (Topic Alias Maximum in CONNECT) gets a
        topic once with its alias, then the alias alone; past its maximum, topics whole."""
        s = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)
        # 5.0 CONNECT, clean start, keep-alive 60, properties: Topic Alias Maximum 2.
        s.sendall(pkt(0x10, b"\x00\x04MQTT\x05\x02\x00\x3c\x03\x22\x00\x02" + string(b"ta")))
        self.assertEqual(read_packets(s, 0.5)[0][0], 2)
        s.sendall(pkt(0x82, b"\x00\x01\x00" + string(b"ta/#") + b"\x00"))  # QoS 0
        self.assertEqual(read_packets(s, 0.5)[0][0], 9)
        pub = Client("ta-pub")
        for t in ("ta/a", "ta/a", "ta/b", "ta/c", "ta/b", "ta/c"):
            pub.pub(t, t.encode(), 0)
        got = [p for p in read_packets(s, 1.0) if p[0] == 3]
        seen = []
        for _, _, body in got:
            tl = body[0] << 8 | body[1]
            topic = body[2:2 + tl]
            plen = body[2 + tl]
            props = body[3 + tl:3 + tl + plen]
            alias = struct.unpack(">H", props[props.index(0x23) + 1:props.index(0x23) + 3])[0] if 0x23 in props else 0
            seen.append((topic, alias, body[3 + tl + plen:]))
        self.assertEqual(seen, [(b"ta/a", 1, b"ta/a"), (b"", 1, b"ta/a"), (b"ta/b", 2, b"ta/b"),
                                (b"ta/c", 0, b"ta/c"), (b"", 2, b"ta/b"), (b"ta/c", 0, b"ta/c")])
        pub.close()
        s.close()

    def test_qos0_producer_held_by_a_full_address(self):
        """QoS 0 has no flow control of its own: a producer to an address full under BLOCK
        is held by TCP (the broker stops reading its connection), and goes on when the
        address has room again."""
        sub = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)  # subscribes, then reads nothing
        sub.sendall(pkt(0x10, b"\x00\x04MQTT\x04\x02\x00\x3c" + string(b"blk-sub")))  # clean session
        self.assertEqual(sub.recv(4)[:2], b"\x20\x02")
        sub.sendall(pkt(0x82, b"\x00\x01" + string(b"blk/t") + b"\x00"))
        time.sleep(0.3)
        pub = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)
        pub.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        pub.sendall(pkt(0x10, b"\x00\x04MQTT\x04\x02\x00\x3c" + string(b"blk-pub")))
        self.assertEqual(pub.recv(4)[:2], b"\x20\x02")
        one = pkt(0x30, string(b"blk/t") + b"x" * 100)
        sent, held = held_by_tcp(pub, one)  # 21 MB at most, far past what the buffers take
        self.assertTrue(held, "the producer was never held (%d sent)" % sent)
        # The subscriber goes (clean session: its queue with it): the address has room, the producer goes on.
        reset(sub)
        pub.settimeout(10)
        for _ in range(200):
            pub.sendall(one)
        pub.close()

    def test_repeated_user_properties(self):
        """[MQTT-3.3.2-17, -18]: user properties reach a subscriber in order, a repeated
        name with every value; a selector sees the first value of the name."""
        sub = Client("up-sub")
        sub.sub("up/t", 1)
        pub = Client("up-pub")
        pp = Properties(PacketTypes.PUBLISH)
        pp.UserProperty = [("k", "v1"), ("color", "red"), ("k", "v2")]
        pub.pub("up/t", "x", 1, props=pp)
        got = sub.wait(1)
        self.assertEqual(list(got[0].properties.UserProperty), [("k", "v1"), ("color", "red"), ("k", "v2")])
        # Without a repeat, nothing is kept twice: the properties as before.
        pp = Properties(PacketTypes.PUBLISH)
        pp.UserProperty = [("a", "1"), ("b", "2")]
        pub.pub("up/t", "y", 1, props=pp)
        got = sub.wait(2)
        self.assertEqual(list(got[1].properties.UserProperty), [("a", "1"), ("b", "2")])
        sub.close()
        pub.close()

    def test_mosquitto_clients(self):
        port = str(BROKER.port)
        for v in ("mqttv311", "mqttv5"):
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", port, "-V", v, "-t", "mc/" + v, "-q", "1",
                                    "-C", "2", "-v", "-W", "10"], stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
            for i in range(2):
                subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-V", v, "-t", "mc/" + v, "-q", "1",
                                "-m", "hello %d" % i], check=True, timeout=10)
            out, _ = sub.communicate(timeout=15)
            self.assertEqual(out.splitlines(), ["mc/%s hello 0" % v, "mc/%s hello 1" % v])
        # A retained message set by mosquitto_pub, read by mosquitto_sub.
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-t", "mc/ret", "-r", "-q", "1", "-m", "kept"],
                       check=True, timeout=10)
        out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", port, "-t", "mc/ret", "-C", "1", "-W", "5"],
                             capture_output=True, text=True, timeout=10).stdout
        self.assertEqual(out.strip(), "kept")

    def test_sessions_survive_a_restart(self):
        global BROKER
        data = tempfile.mkdtemp(prefix="mqr-mqtt-restart-")
        own = Mqrd(BROKER.mqrd, CONFIG, data_dir=data)
        main, BROKER = BROKER, own
        try:
            for proto, cid in ((V3, "restart3"), (V5, "restart5")):
                c = Client(cid, proto, clean=False, expiry=3600 if proto == V5 else None)
                c.sub("restart/%s/#" % cid, 2)
                c.close()
                p = Client("restart-pub")
                p.pub("restart/%s/a" % cid, "before", 1)  # waits, durable, in its queue
                p.pub("restart/%s/r" % cid, "retained", 1, retain=True)
                p.close()
            self.assertEqual(own.stop(), 0)
            own.start()
            for proto, cid in ((V3, "restart3"), (V5, "restart5")):
                p = Client("restart-pub")
                p.pub("restart/%s/b" % cid, "after", 2)  # the kept subscription takes it
                p.close()
                c = Client(cid, proto, clean=False, expiry=3600 if proto == V5 else None)
                self.assertEqual(c.connack[0], 1, cid)  # session present
                got = c.wait(3)
                time.sleep(0.3)
                self.assertEqual(sorted(bodies(got)), ["after", "before", "retained"], cid)
                c.close()
                s = Client(cid + "-new", proto)  # the retained message was kept too
                s.sub("restart/%s/r" % cid, 1)
                self.assertEqual(bodies(s.wait(1)), ["retained"])
                s.close()
        finally:
            BROKER = main
            own.stop()

    def test_resend_keeps_packet_id(self):
        """[MQTT-4.4.0-1]: a QoS 1 PUBLISH not acknowledged when the connection went is sent
        again at the reconnect with DUP set and its original packet identifier."""
        sub, _ = raw_connect(self, BROKER.port, b"rs-sub")
        sub.sendall(pkt(0x82, b"\x00\x01" + string(b"rs/t") + b"\x01"))
        self.assertEqual(read_packets(sub, 0.5)[0][0], 9)  # SUBACK
        pub = Client("rs-pub")
        for i in range(3):
            pub.pub("rs/t", b"m%d" % i, qos=1)
        first = [p for p in read_packets(sub) if p[0] == 3]
        self.assertEqual(len(first), 3)
        ids = [p[2][2 + 4:4 + 4] for p in first]
        self.assertEqual([p[1] & 8 for p in first], [0, 0, 0])  # not DUP the first time
        sub.sendall(bytes([0x40, 2]) + ids[0])  # PUBACK for the first only
        time.sleep(0.2)
        sub.close()
        sub, present = raw_connect(self, BROKER.port, b"rs-sub")
        self.assertEqual(present, 1)
        again = [p for p in read_packets(sub) if p[0] == 3]
        self.assertEqual([p[2][8:] for p in again], [b"m1", b"m2"])
        self.assertEqual([p[2][6:8] for p in again], ids[1:])  # the same packet ids
        self.assertEqual([p[1] & 8 for p in again], [8, 8])  # with DUP
        for i in ids[1:]:
            sub.sendall(bytes([0x40, 2]) + i)
        pub.pub("rs/t", b"m3", qos=1)  # a new one: an id not in use
        new = [p for p in read_packets(sub) if p[0] == 3]
        self.assertEqual(len(new), 1)
        self.assertEqual(new[0][1] & 8, 0)
        sub.sendall(pkt(0xA2, b"\x00\x02" + string(b"rs/t")))  # UNSUBSCRIBE
        read_packets(sub, 0.3)
        sub.close()
        pub.close()

    def test_refused_topic_refused_for_every_session(self):
        """A subscription the address settings refuse (auto-create-queues off) is refused
        alike for a clean session and a persistent one: one decision for both."""
        for cid, clean in ((b"ns-clean", True), (b"ns-kept", False)):
            s = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)
            s.sendall(pkt(0x10, b"\x00\x04MQTT\x04" + (b"\x02" if clean else b"\x00") + b"\x00\x3c" + string(cid)))
            self.assertEqual(s.recv(4)[:2], b"\x20\x02")
            s.sendall(pkt(0x82, b"\x00\x05" + string(b"test/nosubscribe") + b"\x02"))
            got = read_packets(s, 0.5)
            self.assertEqual(got[0][:2], (9, 0))
            self.assertEqual(got[0][2], b"\x00\x05\x80", cid)  # SUBACK: Failure
            s.close()

    def test_oversized_packet_logged_as_warning(self):
        """A client cut off for a packet over max-packet-size is logged at warn, as
        docs/operations.md says of clients cut off."""
        s = socket.create_connection(("127.0.0.1", BROKER.port), timeout=5)
        s.sendall(pkt(0x10, b"\x00\x04MQTT\x04\x02\x00\x3c" + string(b"big")))
        self.assertEqual(s.recv(4)[:2], b"\x20\x02")
        body = string(b"big/t") + b"x" * (70 * 1024)
        n, rl = len(body), b""
        while True:
            rl += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if n == 0:
                break
        try:
            s.sendall(b"\x30" + rl + body)
        except OSError:
            pass
        self.assertTrue(wait_for(lambda: "at most 65536" in BROKER.log_text(), 5))
        lines = [ln for ln in BROKER.log_text().splitlines() if "(127.0.0.1" in ln and "0x95" in ln]
        self.assertTrue(lines)
        self.assertIn(" WARN ", lines[-1])
        s.close()

    def test_qos2_exchanges_survive_a_restart(self):
        """Exactly once across a restart: a PUBLISH received but not released is not sent
        again when its client repeats it; a delivery the client received (PUBREC) gets its
        PUBREL again, not a second PUBLISH."""
        global BROKER
        data = tempfile.mkdtemp(prefix="mqr-mqtt-qos2-")
        own = Mqrd(BROKER.mqrd, CONFIG, data_dir=data)
        main, BROKER = BROKER, own

        def connect(cid):
            return raw_connect(self, own.port, cid)

        try:
            sub, _ = connect(b"q2sub")
            sub.sendall(pkt(0x82, b"\x00\x01" + string(b"q2/t") + b"\x02"))
            self.assertEqual(read_packets(sub)[0][0], 9)  # SUBACK
            pub, _ = connect(b"q2pub")
            pub.sendall(pkt(0x34, string(b"q2/t") + b"\x00\x07once"))
            self.assertIn((5, 0, b"\x00\x07"), read_packets(pub))  # PUBREC 7, no PUBREL yet
            got = read_packets(sub)
            publishes = [p for p in got if p[0] == 3]
            self.assertEqual(len(publishes), 1)
            body = publishes[0][2]
            pid = body[2 + len(b"q2/t"):4 + len(b"q2/t")]
            sub.sendall(bytes([0x50, 2]) + pid)  # PUBREC: the broker answers PUBREL
            self.assertIn((6, 2, pid), read_packets(sub))
            sub.close()
            pub.close()
            self.assertEqual(own.stop(), 0)
            own.start()
            pub, present = connect(b"q2pub")
            self.assertEqual(present, 1)
            pub.sendall(pkt(0x3C, string(b"q2/t") + b"\x00\x07once"))  # the same, DUP: not sent again
            self.assertIn((5, 0, b"\x00\x07"), read_packets(pub))
            pub.sendall(bytes([0x62, 2, 0, 7]))  # PUBREL
            self.assertIn((7, 0, b"\x00\x07"), read_packets(pub))  # PUBCOMP
            sub, present = connect(b"q2sub")
            self.assertEqual(present, 1)
            got = read_packets(sub, 1.5)
            self.assertIn((6, 2, pid), got)  # its PUBREL again
            self.assertEqual([p for p in got if p[0] == 3], [])  # and no second PUBLISH
            sub.sendall(bytes([0x70, 2]) + pid)  # PUBCOMP
            time.sleep(0.3)
            sub.close()
            pub.close()
        finally:
            BROKER = main
            own.stop()

    def test_hostile_packets(self):
        watcher = Client("hostile-watch")
        watcher.sub("alive/t", 1)

        def connect5(cid=b"h"):
            vh = b"\x00\x04MQTT\x05\x02\x00\x3c\x00"
            body = vh + struct.pack(">H", len(cid)) + cid
            return bytes([0x10, len(body)]) + body

        def connect4(cid=b"h"):
            body = b"\x00\x04MQTT\x04\x02\x00\x3c" + struct.pack(">H", len(cid)) + cid
            return bytes([0x10, len(body)]) + body

        def publish(topic, payload=b"x", flags=0x30):
            body = struct.pack(">H", len(topic)) + topic + payload
            return bytes([flags, len(body)]) + body

        cases = [
            (b"\x10\xff\xff\xff\xff\x01", None),  # remaining length of five bytes
            (connect4() + publish(b"a/+/b"), None),  # a wildcard in a PUBLISH topic: closed
            (connect5() + publish(b"a/#"), 0x82),
            (connect5() + publish(b"a\x00b"), 0x81),  # U+0000
            (connect5() + publish(b"a/\xff"), 0x81),  # not UTF-8
            (connect5() + connect5(), 0x82),  # a second CONNECT
            (connect5() + b"\x32\x03\x00\x01a", 0x81),  # QoS 1 without room for its packet id
            (connect4() + b"\xc1\x00", None),  # PINGREQ with reserved flags
            (connect5() + b"\x30\xff\xff\x04" + b"\x00" * 16, 0x95),  # over max-packet-size
            (b"\x20\x02\x00\x00", None),  # a CONNACK from a client, first
        ]
        for data, reason in cases:
            s, got, closed = raw_closed(BROKER.port, data, timeout=3)
            s.close()
            self.assertTrue(closed, data[:24])  # each closes the connection
            if reason is None:  # 3.1.1, or before CONNECT: closed with no DISCONNECT
                self.assertNotIn(b"\xe0", got[4:] if got.startswith(b"\x20") else got, data[:24])
            else:
                i = got.find(b"\xe0")
                self.assertGreaterEqual(i, 0, (data[:24], got))
                self.assertEqual(got[i + 2], reason, (data[:24], got))
        # A CONNECT with a level the broker does not speak: CONNACK refusing it.
        s, got = raw(BROKER.port, b"\x10\x0c\x00\x04MQTT\x03\x02\x00\x3c\x00\x00", timeout=3)
        self.assertEqual(got[:4], b"\x20\x02\x00\x01")
        s.close()
        # Half a packet, then gone.
        s = socket.create_connection(("127.0.0.1", BROKER.port))
        s.sendall(connect5() + b"\x30\x80\x01" + b"abc")
        s.close()
        self.assertTrue(BROKER.alive())
        p = Client("hostile-pub")
        p.pub("alive/t", "still here", 1)
        self.assertEqual(bodies(watcher.wait(1)), ["still here"])
        p.close()
        watcher.close()


if __name__ == "__main__":
    run_suite(CONFIG, sys.modules[__name__])
