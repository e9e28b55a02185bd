"""MQTT and STOMP over WebSockets against a real mqrd: MQTT.js and stompjs over ws:// and
wss:// (ws_clients.cjs, in node), paho-mqtt's websockets transport (MQTT 3.1.1 and 5.0),
and a message across from a WebSocket client to a TCP one; and what RFC 6455 says to
refuse, the broker serving on: a bad handshake, an unknown subprotocol, another version,
an unmasked client frame, a fragmented control frame, an oversized frame, and a close in
the middle of an MQTT packet.

usage: test_websocket.py MQRD MQR"""

import base64
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, self_signed, wait_for  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402

MQRD, MQR = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
NPM = os.path.join(HERE, "..", "..", ".deps", "npm", "node_modules")
DIR = tempfile.mkdtemp(prefix="mqr-ws-")

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - {name: plain, host: 127.0.0.1, port: 0, protocols: [mqtt, stomp, http], anycast-prefix: /queue/,
     mqtt: {max-packet-size: 256KiB}}
  - name: secure
    host: 127.0.0.1
    port: 0
    protocols: [mqtt, stomp, http]
    anycast-prefix: /queue/
    tls: {cert: CERT, key: KEY}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
"""


def upgrade(port, protocol="mqtt", version="13", key=None, extra=""):
    key = key if key is not None else base64.b64encode(os.urandom(16)).decode()
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(("GET /mqtt HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: %s\r\nSec-WebSocket-Protocol: %s\r\n%s\r\n"
               % (key, version, protocol, extra)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return s, head.decode("latin-1")


def frame(payload, opcode=0x2, fin=True, mask=True, length=None, wide=False):
    """A client's frame; wide: its length in two bytes more than it needs."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | opcode
    if n < 126 and not wide:
        hdr = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
    else:
        hdr = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
    if not mask:
        return hdr + payload
    key = os.urandom(4)
    return hdr + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))


def read_until_closed(s, timeout=5):
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got, True
            got += chunk
    except socket.timeout:
        return got, False
    except ConnectionResetError:
        return got, True


def close_code(data):
    """The status code of the first close frame (0x88) the server sent in data, or None."""
    i = 0
    while i + 2 <= len(data):
        op, n = data[i] & 0x0F, data[i + 1] & 0x7F
        j = i + 2
        if n == 126:
            n, j = struct.unpack("!H", data[j:j + 2])[0], j + 2
        elif n == 127:
            n, j = struct.unpack("!Q", data[j:j + 8])[0], j + 8
        if op == 0x8:
            return struct.unpack("!H", data[j:j + 2])[0] if n >= 2 else 1005
        i = j + n
    return None


def varint(n):
    out = b""
    while True:
        n, b = n >> 7, n & 0x7F
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def mqtt_packets(s, count, timeout=20):
    """The next count MQTT packets from the server's frames on s, as (first byte, body);
    fails the test if they do not all come within timeout (what is read past them is
    kept for the next call)."""
    buf, data = PENDING.setdefault(s, [b"", b""]), None
    deadline = time.time() + timeout
    got = []
    while len(got) < count:
        raw, stream = buf
        while len(raw) >= 2:  # frames out, their payloads into the stream
            n, j = raw[1] & 0x7F, 2
            if n == 126:
                n, j = (struct.unpack("!H", raw[2:4])[0], 4) if len(raw) >= 4 else (None, 0)
            elif n == 127:
                n, j = (struct.unpack("!Q", raw[2:10])[0], 10) if len(raw) >= 10 else (None, 0)
            if n is None or len(raw) < j + n:
                break
            if raw[0] & 0x0F == 0xA:  # a pong: counted
                PONGS[s] = PONGS.get(s, 0) + 1
            elif raw[0] & 0x0F < 8:
                stream += raw[j:j + n]
            raw = raw[j + n:]
        while len(got) < count and len(stream) >= 2:  # packets out of the stream
            n, mult, i = 0, 1, 1
            while i < len(stream) and i < 5:
                n += (stream[i] & 0x7F) * mult
                mult *= 128
                i += 1
                if not stream[i - 1] & 0x80:
                    break
            else:
                break
            if len(stream) < i + n:
                break
            got.append((stream[0], stream[i:i + n]))
            stream = stream[i + n:]
        buf[0], buf[1] = raw, stream
        if len(got) < count:
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError("%d of %d packets came" % (len(got), count))
            s.settimeout(left)
            try:
                data = s.recv(1 << 20)
            except socket.timeout:
                continue
            if not data:
                raise AssertionError("closed after %d of %d packets" % (len(got), count))
            buf[0] += data
    return got


PENDING = {}
PONGS = {}

CONNECT = bytes([0x10, 16, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 30, 0, 4]) + b"ws-r"


class WebSockets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cert, key = self_signed(DIR)
        cls.b = Mqrd(MQRD, CONFIG.replace("CERT", cert).replace("KEY", key))
        line = [x for x in cls.b.log_text().split("\n") if "ready on" in x][-1]
        cls.port = int(re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1))
        cls.tls = int(re.search(r"tls://127\.0\.0\.1:(\d+)", line).group(1))

    @classmethod
    def tearDownClass(cls):
        cls.b.stop_clean(DIR)

    def assert_refused(self, data, code):
        """data sent after an upgrade is answered with a close frame of code, the
        connection closed, and the broker serves on."""
        s, head = upgrade(self.port)
        self.assertIn("101", head)
        s.sendall(data)
        got, closed = read_until_closed(s)
        self.assertTrue(closed)
        self.assertEqual(close_code(got), code)
        self.assert_serving()

    def assert_serving(self):
        s, head = upgrade(self.port)
        self.assertIn("101 Switching Protocols", head)
        s.close()

    # ---- the real clients -----------------------------------------------------------------

    def test_node_clients(self):
        env = dict(os.environ, NODE_PATH=NPM)
        r = subprocess.run(["node", os.path.join(HERE, "ws_clients.cjs"), str(self.port), str(self.tls),
                            os.path.join(DIR, "cert.pem")], capture_output=True, text=True, timeout=120, env=env,
                           cwd=os.path.join(NPM, ".."))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("ok   "), 8, r.stdout)

    def test_paho_websockets_and_across_to_tcp(self):
        got, tcp_got = [], []
        sub = paho.Client(client_id="paho-ws-sub", transport="websockets", protocol=paho.MQTTv5)
        sub.on_message = lambda c, u, m: got.append(m.payload)
        sub.connect("127.0.0.1", self.port)
        sub.loop_start()
        sub.subscribe("across/x", 1)
        tcp = paho.Client(client_id="paho-tcp-sub", protocol=paho.MQTTv311)
        tcp.on_message = lambda c, u, m: tcp_got.append(m.payload)
        tcp.connect("127.0.0.1", self.port)
        tcp.loop_start()
        tcp.subscribe("across/x", 1)
        time.sleep(0.3)
        pub = paho.Client(client_id="paho-ws-pub", transport="websockets", protocol=paho.MQTTv311)
        pub.connect("127.0.0.1", self.port)
        pub.loop_start()
        for i in range(20):
            pub.publish("across/x", b"%d:" % i + b"y" * (i * 1000), qos=1).wait_for_publish()
        self.assertTrue(wait_for(lambda: len(got) == 20 and len(tcp_got) == 20))
        self.assertEqual(got, tcp_got)
        self.assertEqual(got[19], b"19:" + b"y" * 19000)
        for c in (sub, tcp, pub):
            c.loop_stop()
            c.disconnect()

    def test_bursts_past_the_read_buffer(self):
        """Bursts of frames larger than the read buffer (each packet a frame, as MQTT.js
        sends them; some packets larger than the buffer), then silence: every PUBLISH is
        answered, with no later bytes to wake the connection, and every one delivered."""
        sub, head = upgrade(self.port)
        sub.sendall(frame(bytes([0x10, 15, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 30, 0, 3]) + b"sub")
                    + frame(bytes([0x82, 12, 0, 1, 0, 7]) + b"burst/x" + bytes([1])))
        pub, head = upgrade(self.port)
        pub.sendall(frame(CONNECT))
        self.assertEqual(mqtt_packets(pub, 1)[0][0], 0x20)
        self.assertEqual([t for t, _ in mqtt_packets(sub, 2)], [0x20, 0x90])
        packet_id, total, answered, delivered = 0, 0, 0, 0
        for size, count in ((100, 3000), (5000, 100), (200000, 3), (16, 9000)):
            burst = []
            for i in range(count):
                packet_id += 1
                body = struct.pack("!H", 7) + b"burst/x" + struct.pack("!H", packet_id) + b"b" * size
                burst.append(frame(bytes([0x32]) + varint(len(body)) + body))
            pub.sendall(b"".join(burst))
            total += count
            acks = mqtt_packets(pub, count)
            self.assertEqual([t for t, _ in acks], [0x40] * count)
            answered += count
            for t, body in mqtt_packets(sub, count):
                self.assertEqual(t & 0xF0, 0x30)
                sub.sendall(frame(bytes([0x40, 2]) + body[9:11]))  # its PUBACK
                delivered += 1
        self.assertEqual((answered, delivered), (total, total))
        pub.close()
        sub.close()

    def test_every_kind_of_frame_split_anywhere(self):
        """Whole messages in one frame (unmasked by mqrd itself) beside what goes through
        wslay: messages in fragments with pings between them, empty frames; the stream cut
        at random bytes. Every PUBLISH is answered in order, comes back to its own subscription
        byte for byte, and every ping has its pong."""
        rnd = random.Random(7)
        s, head = upgrade(self.port)
        s.sendall(frame(bytes([0x10, 15, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 30, 0, 3]) + b"mix")
                  + frame(bytes([0x82, 10, 0, 1, 0, 5]) + b"mix/x" + bytes([0])))
        self.assertEqual([t for t, _ in mqtt_packets(s, 2)], [0x20, 0x90])
        stream, bodies, pings, count = b"", [], 0, 600
        for i in range(1, count + 1):
            payload = bytes([i % 251]) * rnd.choice((0, 10, 125, 126, 1000, 70000))
            body = struct.pack("!H", 5) + b"mix/x" + struct.pack("!H", i) + payload
            bodies.append(payload)
            packet = bytes([0x32]) + varint(len(body)) + body
            kind = rnd.randrange(4)
            if kind <= 1:  # one frame (the common case), now and then after an empty one
                stream += (frame(b"") if kind else b"") + frame(packet)
            else:  # in fragments, pings between them
                cuts = sorted(rnd.sample(range(1, len(packet)), 2))
                stream += frame(packet[:cuts[0]], fin=False)
                if kind == 3:
                    stream += frame(b"p%d" % i, opcode=0x9)
                    pings += 1
                stream += frame(packet[cuts[0]:cuts[1]], opcode=0x0, fin=False) + frame(packet[cuts[1]:], opcode=0x0)
        at = 0
        while at < len(stream):
            n = rnd.choice((1, 2, 3, 7, 100, 4096, 70000))
            s.sendall(stream[at:at + n])
            at += n
        got = mqtt_packets(s, 2 * count, timeout=60)
        self.assertEqual([struct.unpack("!H", b[:2])[0] for t, b in got if t == 0x40], list(range(1, count + 1)))
        self.assertEqual([b[7:] for t, b in got if t & 0xF0 == 0x30], bodies)
        self.assertEqual(PONGS.get(s), pings)
        self.assertGreater(pings, 50)
        s.close()
        self.assertNotIn("WebSocket protocol error", self.b.log_text())

    # ---- refused as RFC 6455 says ---------------------------------------------------------

    def test_bad_handshakes(self):
        s, head = upgrade(self.port, key="short")
        self.assertTrue(head.startswith("HTTP/1.1 400 "), head)
        self.assertTrue(read_until_closed(s)[1])
        s, head = upgrade(self.port, protocol="amqp, chat")
        self.assertTrue(head.startswith("HTTP/1.1 400 "), head)
        s.close()
        s, head = upgrade(self.port, version="8")
        self.assertTrue(head.startswith("HTTP/1.1 426 "), head)
        self.assertIn("Sec-WebSocket-Version: 13", head)
        s.close()
        self.assert_serving()

    def test_unmasked_client_frame(self):
        self.assert_refused(frame(CONNECT, mask=False), 1002)

    def test_fragmented_control_frame(self):
        self.assert_refused(frame(b"ping", opcode=0x9, fin=False), 1002)

    def test_ping_answered_and_mqtt_inside(self):
        s, head = upgrade(self.port)
        s.sendall(frame(b"hi", opcode=0x9) + frame(CONNECT[:7]) + frame(CONNECT[7:]))
        s.settimeout(5)
        got = b""
        deadline = time.time() + 5
        while time.time() < deadline and not (b"\x8a\x02hi" in got and b"\x20\x02\x00\x00" in got):
            got += s.recv(65536)
        self.assertIn(b"\x8a\x02hi", got, "a pong with the ping's payload")
        self.assertIn(b"\x20\x02\x00\x00", got, "CONNACK, from a CONNECT split over two frames")
        s.close()

    def test_length_in_more_bytes_than_it_needs(self):
        self.assert_refused(frame(CONNECT) + frame(b"\xc0\x00", wide=True), 1002)  # a PINGREQ's length in 3 bytes

    def test_text_frame_not_utf8(self):
        self.assert_refused(frame(CONNECT) + frame(b"\xc0\x00", opcode=0x1), 1007)  # a PINGREQ in a text frame

    def test_oversized_frame(self):
        self.assert_refused(frame(b"", length=10 * 1024 * 1024)[:14] + b"z" * 1000, 1009)  # a 10 MiB frame's start

    def test_close_in_the_middle_of_an_mqtt_packet(self):
        s, head = upgrade(self.port)
        s.sendall(frame(CONNECT[:9]) + frame(struct.pack("!H", 1000), opcode=0x8))
        data, closed = read_until_closed(s)
        self.assertTrue(closed)
        self.assertEqual(close_code(data), 1000, data)
        self.assertTrue(wait_for(lambda: "WebSocket closed by the client" in self.b.log_text()))
        self.assert_serving()


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
