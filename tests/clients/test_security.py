"""Who may connect, against a real mqrd with the real clients: a users file made by
`mqr user add` (argon2id) and a mosquitto password_file line; MQTT 3.1.1 and 5.0 through
paho-mqtt and mosquitto_pub, STOMP through stomp.py, the native protocol through `mqr`.
A right password connects; a wrong one, an unknown user and an anonymous client are
refused with each protocol's code; failures from one address are answered later and
later; SIGHUP reloads the users file (a removed user's connection closes; a file that
cannot be read keeps the previous users).

usage: test_security.py MQRD MQR"""

import base64
import hashlib
import hmac
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import paho.mqtt.client as mqtt
import stomp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, wait_for  # noqa: E402

MQRD, MQR = None, None
DIR = tempfile.mkdtemp(prefix="mqr-security-")
USERS = os.path.join(DIR, "users")
# mosquitto_passwd 2.0.11: carol / pa55word.
CAROL = ("carol:$7$101$qtJtH8jngFBw8pk8$oPqmyjDlU7j4vBylhgrK5s1gvnEDgF4FmXS/tLT0LjbZSFcrgacvJfngDa1uab7Bhh"
         "pNPeysY/1oYmBFL82ruA==\n")

CONFIG = """
listeners:
  - {name: main, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp]}
security:
  users-file: %s
  authentication-cache-ttl: 2s
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
""" % USERS


def mqr(*args, check=True, stdin=None):
    r = subprocess.run([MQR] + list(args), capture_output=True, text=True, timeout=60, input=stdin)
    if check and r.returncode != 0:
        raise AssertionError("mqr %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def mqtt_connect(port, user, password, v5=False):
    """CONNECT with paho: the CONNACK's return code (3.1.1) or reason code value (5.0)."""
    proto = mqtt.MQTTv5 if v5 else mqtt.MQTTv311
    c = mqtt.Client(client_id="", protocol=proto) if v5 else mqtt.Client(client_id="sec-%f" % time.time(),
                                                                           protocol=proto)
    if user is not None:
        c.username_pw_set(user, password)
    got = {}
    ev = threading.Event()

    def on_connect(client, userdata, flags, rc, properties=None):
        got["rc"] = rc.value if hasattr(rc, "value") else rc
        ev.set()

    c.on_connect = on_connect
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    ok = ev.wait(15)
    c.loop_stop()
    c.disconnect()
    if not ok:
        raise AssertionError("no CONNACK")
    return got["rc"]


class StompListener(stomp.ConnectionListener):
    def __init__(self):
        self.errors = []

    def on_error(self, frame):
        self.errors.append(frame)


def stomp_connect(port, login, passcode):
    """True when CONNECTED; else the ERROR frame's message header."""
    conn = stomp.Connection12([("127.0.0.1", port)], reconnect_attempts_max=1)
    lis = StompListener()
    conn.set_listener("l", lis)
    try:
        if login is None:
            conn.connect(wait=True)
        else:
            conn.connect(login, passcode, wait=True)
        ok = conn.is_connected()
        conn.disconnect()
        return ok
    except Exception:
        wait_for(lambda: lis.errors, 5)
        return lis.errors[0].headers.get("message") if lis.errors else "no ERROR frame"


def mqtt5_raw(port, user, password, cid):
    """An MQTT 5.0 client on a raw socket: (socket, CONNACK reason code)."""
    def string(t):
        return struct.pack(">H", len(t)) + t
    body = (b"\x00\x04MQTT\x05\xc2\x00\x3c\x00" + string(cid.encode()) + string(user.encode()) +
            string(password.encode()))
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall(bytes([0x10, len(body)]) + body)
    got = s.recv(64)
    return s, got[3]


def mqtt5_publish(s, topic, qos=1, retain=False, pid=1):
    """A PUBLISH; with QoS 1, its PUBACK's reason code (0 when it has none)."""
    body = struct.pack(">H", len(topic)) + topic.encode() + (struct.pack(">H", pid) if qos else b"") + b"\x00" + b"hi"
    s.sendall(bytes([0x30 | qos << 1 | (1 if retain else 0), len(body)]) + body)
    if qos == 0:
        return None
    got = s.recv(64)
    assert got[0] == 0x40, got
    return got[4] if got[1] >= 3 else 0


# ---- MQTT 5 enhanced authentication with SCRAM-SHA-256, on a raw socket (paho has none) ----

def vbi(n):
    out = b""
    while True:
        b = n & 0x7F; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out

def string(b): return struct.pack(">H", len(b)) + b

def props(items):
    body = b"".join(items)
    return vbi(len(body)) + body

def packet(first, body): return bytes([first]) + vbi(len(body)) + body

def read_packet(s):
    first = s.recv(1)
    if not first: return None, None
    mult, n = 1, 0
    while True:
        b = s.recv(1)[0]; n += (b & 0x7F) * mult; mult *= 128
        if not b & 0x80: break
    body = b""
    while len(body) < n: body += s.recv(n - len(body))
    return first[0], body

def parse_props(body):
    n, i, mult = 0, 0, 1
    while True:
        b = body[i]; i += 1; n += (b & 0x7F) * mult; mult *= 128
        if not b & 0x80: break
    end = i + n; out = {}
    while i < end:
        pid = body[i]; i += 1
        if pid in (0x15, 0x16):
            l = struct.unpack(">H", body[i:i + 2])[0]; out[pid] = body[i + 2:i + 2 + l]; i += 2 + l
        elif pid in (0x21, 0x22, 0x13):
            i += 2
        elif pid in (0x27, 0x11):
            i += 4
        elif pid in (0x12, 0x1F):
            l = struct.unpack(">H", body[i:i + 2])[0]; i += 2 + l
        else:
            i += 1
    return out

def scram_connect(port, user, password):
    """An MQTT 5 CONNECT with SCRAM-SHA-256: the CONNACK's reason code, and whether the
    server-final it carried verified."""
    cnonce = base64.b64encode(os.urandom(18)).decode()
    bare = "n=%s,r=%s" % (user, cnonce)
    cf = ("n,," + bare).encode()
    vh = b"\x00\x04MQTT\x05\x02\x00\x3c" + props([b"\x15" + string(b"SCRAM-SHA-256"), b"\x16" + string(cf)])
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall(packet(0x10, vh + string(b"scram-client")))
    t, body = read_packet(s)
    if t >> 4 == 2:  # CONNACK straight away: refused
        return body[1], False
    assert t >> 4 == 15 and body[0] == 0x18, (t, body)
    sf = parse_props(body[1:])[0x16].decode()
    attrs = dict(kv.split("=", 1) for kv in sf.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored = hashlib.sha256(client_key).digest()
    without = "c=biws,r=" + attrs["r"]
    auth = ",".join([bare, sf, without]).encode()
    sig = hmac.new(stored, auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    cfinal = (without + ",p=" + proof).encode()
    s.sendall(packet(0xF0, b"\x18" + props([b"\x15" + string(b"SCRAM-SHA-256"), b"\x16" + string(cfinal)])))
    t, body = read_packet(s)
    assert t >> 4 == 2, t
    code = body[1]
    ok = False
    if code == 0:
        p = parse_props(body[2:])
        server_key = hmac.new(salted, b"Server Key", "sha256").digest()
        want = base64.b64encode(hmac.new(server_key, auth, "sha256").digest()).decode()
        ok = p.get(0x16, b"").decode() == "v=" + want
    s.close()
    return code, ok


class Security(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mqr("user", "add", "--users-file", USERS, "alice", "--roles", "admin", "--password", "wonderland")
        mqr("user", "add", "--users-file", USERS, "bob", "--password-stdin", stdin="builder\n")
        with open(USERS, "a") as f:
            f.write(CAROL)
        cls.b = Mqrd(MQRD, CONFIG)

    @classmethod
    def tearDownClass(cls):
        code = cls.b.stop()
        if code != 0:
            raise AssertionError("mqrd exited %s: %s" % (code, cls.b.log_text()[-3000:]))

    def test_01_no_password_in_the_file(self):
        with open(USERS) as f:
            text = f.read()
        self.assertNotIn("wonderland", text)
        self.assertNotIn("builder", text)
        self.assertIn("alice:admin:$argon2id$", text)
        self.assertEqual(os.stat(USERS).st_mode & 0o777, 0o600)

    def test_mqtt_311(self):
        self.assertEqual(mqtt_connect(self.b.port, "alice", "wonderland"), 0)
        self.assertEqual(mqtt_connect(self.b.port, "carol", "pa55word"), 0)  # a mosquitto hash
        self.assertEqual(mqtt_connect(self.b.port, "alice", "wrong"), 4)  # bad user name or password
        self.assertEqual(mqtt_connect(self.b.port, "mallory", "x"), 4)
        self.assertEqual(mqtt_connect(self.b.port, None, None), 5)  # not authorized: anonymous

    def test_mqtt_5(self):
        self.assertEqual(mqtt_connect(self.b.port, "bob", "builder", v5=True), 0)
        self.assertEqual(mqtt_connect(self.b.port, "bob", "wrong", v5=True), 0x86)
        self.assertEqual(mqtt_connect(self.b.port, None, None, v5=True), 0x87)

    def test_mosquitto_pub(self):
        ok = subprocess.run(["mosquitto_pub", "-p", str(self.b.port), "-h", "127.0.0.1", "-u", "alice", "-P",
                             "wonderland", "-t", "t", "-m", "x"], capture_output=True, text=True, timeout=30)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        bad = subprocess.run(["mosquitto_pub", "-p", str(self.b.port), "-h", "127.0.0.1", "-u", "bob", "-P",
                              "wrongpass", "-t", "t", "-m", "x"], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("bad user name or password", (bad.stdout + bad.stderr).lower())

    def test_stomp(self):
        self.assertIs(stomp_connect(self.b.port, "alice", "wonderland"), True)
        self.assertEqual(stomp_connect(self.b.port, "alice", "nope"), "Security Error")
        self.assertEqual(stomp_connect(self.b.port, None, None), "Security Error")

    def test_native_anonymous_refused(self):
        r = mqr("stat", "--url", "tcp://127.0.0.1:%d" % self.b.port, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("anonymous clients are not allowed", r.stderr)

    def test_native_sasl(self):
        """The native protocol: SCRAM-SHA-256 on a plain connection (mqr --user/--password,
        or user:password@ in the URL); a wrong password refused; a user whose hash came
        from mosquitto has no SCRAM keys, so only PLAIN over TLS serves it (test_tls)."""
        url = "tcp://127.0.0.1:%d" % self.b.port
        r = mqr("stat", "--url", url, "--user", "alice", "--password", "wonderland")
        self.assertIn("connections=", r.stdout)
        r = mqr("stat", "--url", "tcp://alice:wonderland@127.0.0.1:%d" % self.b.port)
        self.assertIn("connections=", r.stdout)
        r = mqr("stat", "--url", url, "--user", "alice", "--password", "wrong", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad user name or password", r.stderr)
        r = mqr("stat", "--url", url, "--user", "carol", "--password", "pa55word", check=False)
        self.assertEqual(r.returncode, 1)
        with open(USERS) as f:
            text = f.read()
        self.assertIn("SCRAM-SHA-256$8192:", text)  # alice's keys, beside her hash

    def test_mqtt5_scram(self):
        """MQTT 5 enhanced authentication: SCRAM-SHA-256 in CONNECT and AUTH; the CONNACK
        carries the server-final message, which proves the broker knew alice's keys."""
        self.assertEqual(scram_connect(self.b.port, "alice", "wonderland"), (0, True))
        self.assertEqual(scram_connect(self.b.port, "alice", "wrong"), (0x86, False))
        self.assertEqual(scram_connect(self.b.port, "nobody", "x"), (0x86, False))  # alike
        self.assertEqual(scram_connect(self.b.port, "carol", "pa55word"), (0x86, False))  # no SCRAM keys
        # Another method: 0x8C Bad authentication method.
        vh = b"\x00\x04MQTT\x05\x02\x00\x3c" + props([b"\x15" + string(b"GSSAPI")])
        s = socket.create_connection(("127.0.0.1", self.b.port), timeout=15)
        s.sendall(packet(0x10, vh + string(b"other")))
        t, body = read_packet(s)
        s.close()
        self.assertEqual((t >> 4, body[1]), (2, 0x8C))

    def test_failures_slow_down(self):
        """Each failure from one address waits longer than the one before; a cached right
        password answers at once."""
        t0 = time.time()
        self.assertEqual(mqtt_connect(self.b.port, "alice", "guess-1"), 4)
        t1 = time.time()
        self.assertEqual(mqtt_connect(self.b.port, "alice", "guess-2"), 4)
        t2 = time.time()
        # The delay comes on top of the KDF, whose time a loaded machine stretches: the
        # log says which delay each failure got, the clock that it was waited.
        delays = [int(m) for m in re.findall(r"authentication of 'alice' from 127\.0\.0\.1:\d+ failed "
                                             r"\(\d+ from that address\); answered in (\d+) ms",
                                             self.b.log_text())]
        self.assertGreaterEqual(len(delays), 2, self.b.log_text()[-1500:])
        self.assertEqual(delays[-1], min(delays[-2] * 2, 8000))
        self.assertGreaterEqual(delays[-2], 250)
        self.assertGreaterEqual(t1 - t0, delays[-2] / 1000)
        self.assertGreaterEqual(t2 - t1, delays[-1] / 1000)
        self.assertEqual(mqtt_connect(self.b.port, "alice", "wonderland"), 0)  # resets it

    def test_zz_reload(self):
        """SIGHUP: a removed user's connection closes and it cannot come back; a users file
        that cannot be read keeps the users there were."""
        mqr("user", "add", "--users-file", USERS, "dave", "--password", "d4ve")
        self.b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: self.b.log_text().count("security: reloaded") >= 1, 10))
        self.assertEqual(mqtt_connect(self.b.port, "dave", "d4ve"), 0)
        gone = threading.Event()
        c = mqtt.Client(client_id="dave-1", protocol=mqtt.MQTTv311)
        c.username_pw_set("dave", "d4ve")
        c.on_disconnect = lambda *a: gone.set()
        c.connect("127.0.0.1", self.b.port, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        mqr("user", "remove", "--users-file", USERS, "dave")
        self.b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(gone.wait(10), "the removed user's connection stays")
        c.loop_stop()
        self.assertEqual(mqtt_connect(self.b.port, "dave", "d4ve"), 4)
        with open(USERS, "a") as f:
            f.write("broken line without a hash\n")
        self.b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "kept the previous users" in self.b.log_text(), 10))
        self.assertEqual(mqtt_connect(self.b.port, "alice", "wonderland"), 0)
        self.assertEqual(mqtt_connect(self.b.port, None, None), 5)  # never "allow everyone"


AUTHZ = """
listeners:
  - {name: main, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp], anycast-prefix: /queue/}
security:
  users-file: %s
  security-settings:
    "orders.#":
      send: [producers]
      consume: [consumers]
      create-address: [producers, consumers]
      create-durable-queue: [producers, consumers]
      create-non-durable-queue: [producers, consumers]
    "#":
      send: [admin]
      consume: [admin]
      browse: [admin]
      manage: [admin]
      create-address: [admin]
      create-durable-queue: [admin]
      create-non-durable-queue: [admin]
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
""" % os.path.join(DIR, "authz-users")


class Authorization(unittest.TestCase):
    """security-settings on the send path: the most specific match governs, whole."""

    @classmethod
    def setUpClass(cls):
        users = os.path.join(DIR, "authz-users")
        for name, roles in (("alice", "admin"), ("pete", "producers"), ("connie", "consumers")):
            mqr("user", "add", "--users-file", users, name, "--roles", roles, "--password", name + "-pw")
        cls.b = Mqrd(MQRD, AUTHZ)

    @classmethod
    def tearDownClass(cls):
        code = cls.b.stop()
        if code != 0:
            raise AssertionError("mqrd exited %s: %s" % (code, cls.b.log_text()[-3000:]))

    def test_mqtt5_puback_says_not_authorized(self):
        s, rc = mqtt5_raw(self.b.port, "pete", "pete-pw", "pete-1")
        self.assertEqual(rc, 0)
        self.assertIn(mqtt5_publish(s, "orders/eu", pid=1), (0, 0x10))  # producers send to orders.#
        self.assertEqual(mqtt5_publish(s, "prices/eu", pid=2), 0x87)  # "#" governs: admin only
        s.close()
        s, rc = mqtt5_raw(self.b.port, "connie", "connie-pw", "connie-1")
        self.assertEqual(mqtt5_publish(s, "orders/eu", pid=3), 0x87)  # nothing inherited from "#"
        s.close()
        s, rc = mqtt5_raw(self.b.port, "alice", "alice-pw", "alice-1")
        self.assertEqual(mqtt5_publish(s, "prices/eu", pid=4), 0x10)  # allowed; no subscriber
        self.assertEqual(mqtt5_publish(s, "orders/us", pid=5), 0x87)  # orders.# governs alice too
        s.close()
        log = self.b.log_text()
        self.assertIn("user 'connie' may not send on 'orders.eu'", log)

    def test_mqtt311_publish_denied_closes(self):
        gone = threading.Event()
        c = mqtt.Client(client_id="connie-311", protocol=mqtt.MQTTv311)
        c.username_pw_set("connie", "connie-pw")
        c.on_disconnect = lambda *a: gone.set()
        c.connect("127.0.0.1", self.b.port, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        c.publish("orders/eu", b"x", qos=1)
        self.assertTrue(gone.wait(10), "a denied 3.1.1 PUBLISH leaves the connection open")
        c.loop_stop()

    def test_retained_not_kept_for_who_may_not_send(self):
        s, _ = mqtt5_raw(self.b.port, "connie", "connie-pw", "connie-r")
        self.assertEqual(mqtt5_publish(s, "orders/retained", retain=True, pid=9), 0x87)
        s.close()
        s, _ = mqtt5_raw(self.b.port, "pete", "pete-pw", "pete-r")
        self.assertIn(mqtt5_publish(s, "orders/kept", retain=True, pid=10), (0, 0x10))
        s.close()
        got = []
        c = mqtt.Client(client_id="connie-sub", protocol=mqtt.MQTTv311)
        c.username_pw_set("connie", "connie-pw")
        c.on_message = lambda cl, u, m: got.append((m.topic, m.retain))
        c.connect("127.0.0.1", self.b.port, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        c.subscribe([("orders/retained", 1), ("orders/kept", 1)])
        self.assertTrue(wait_for(lambda: got, 10))
        time.sleep(0.5)
        c.loop_stop()
        c.disconnect()
        self.assertEqual(got, [("orders/kept", True)])  # the refused one was not kept

    def test_stomp_send_denied(self):
        conn = stomp.Connection12([("127.0.0.1", self.b.port)])
        lis = StompListener()
        conn.set_listener("l", lis)
        conn.connect("connie", "connie-pw", wait=True)
        conn.send("/queue/orders.eu", "x", receipt="r1")
        self.assertTrue(wait_for(lambda: lis.errors, 10))
        self.assertEqual(lis.errors[0].headers.get("message"), "EPERM")
        self.assertIn("may not send on 'orders.eu'", lis.errors[0].body)
        conn2 = stomp.Connection12([("127.0.0.1", self.b.port)])
        conn2.connect("pete", "pete-pw", wait=True)
        conn2.send("/queue/orders.eu", "x", receipt="r2")
        conn2.disconnect()

    def test_subscriptions(self):
        """CONSUME on the address subscribed to: a wildcard subscription's is checked as
        the name it is, so connie's orders/# is taken and '#' (every address) is not."""
        got = {}
        ev = threading.Event()
        c = mqtt.Client(client_id="connie-subs", protocol=mqtt.MQTTv5)
        c.username_pw_set("connie", "connie-pw")

        def on_subscribe(client, userdata, mid, reason_codes, properties=None):
            got[mid] = [r.value for r in reason_codes]
            ev.set()

        c.on_subscribe = on_subscribe
        c.connect("127.0.0.1", self.b.port, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        _, mid = c.subscribe([("orders/#", 1), ("#", 1), ("prices/eu", 0)])
        self.assertTrue(ev.wait(10))
        self.assertEqual(got[mid], [1, 0x87, 0x87])
        c.loop_stop()
        c.disconnect()
        conn = stomp.Connection12([("127.0.0.1", self.b.port)])
        lis = StompListener()
        conn.set_listener("l", lis)
        conn.connect("pete", "pete-pw", wait=True)
        conn.subscribe("/queue/orders.eu", id="1")  # producers may not consume
        self.assertTrue(wait_for(lambda: lis.errors, 10))
        self.assertEqual(lis.errors[0].headers.get("message"), "EPERM")

    def test_will_sent_as_its_user(self):
        """A will is sent as the connection's user: connie's to orders.will is refused."""
        s, rc = mqtt5_raw(self.b.port, "pete", "pete-pw", "pete-will")
        s.close()
        c = mqtt.Client(client_id="connie-will", protocol=mqtt.MQTTv311)
        c.username_pw_set("connie", "connie-pw")
        c.will_set("orders/will", b"gone", qos=1)
        c.connect("127.0.0.1", self.b.port, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        c.loop_stop()
        c.socket().close()  # gone without DISCONNECT: the will goes, as connie
        self.assertTrue(wait_for(lambda: "user 'connie' may not send on 'orders.will'" in self.b.log_text(), 10))


GUEST = """
listeners:
  - {name: main, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp], max-connections: 3}
security:
  allow-anonymous: true
  anonymous-roles: guest
  security-settings:
    "public.#":
      send: [guest]
      consume: [guest]
      browse: [guest]
      create-address: [guest]
      create-durable-queue: [guest]
      create-non-durable-queue: [guest]
    "#": {send: [admin], consume: [admin], browse: [admin], manage: [admin]}
addresses:
  orders: {anycast: [orders]}
  public.news: {anycast: [public.news]}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
"""


class Anonymous(unittest.TestCase):
    """The native protocol's anonymous client, with anonymous-roles: what mqr may do and
    see."""

    @classmethod
    def setUpClass(cls):
        cls.b = Mqrd(MQRD, GUEST)
        cls.url = "tcp://127.0.0.1:%d" % cls.b.port

    @classmethod
    def tearDownClass(cls):
        code = cls.b.stop()
        if code != 0:
            raise AssertionError("mqrd exited %s: %s" % (code, cls.b.log_text()[-3000:]))

    def test_send_and_receive(self):
        mqr("send", "--url", self.url, "--body", "hello", "public.news")
        r = mqr("recv", "--url", self.url, "--count", "1", "--timeout", "5", "public.news")
        self.assertIn("hello", r.stdout)
        r = mqr("send", "--url", self.url, "--body", "x", "orders", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("EPERM", r.stderr)
        r = mqr("recv", "--url", self.url, "--count", "1", "--timeout", "2", "orders", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("EPERM", r.stderr)

    def test_stat_shows_what_it_may_see(self):
        import json
        st = json.loads(mqr("stat", "--url", self.url, "--json").stdout)
        names = [a["name"] for a in st["addresses"]]
        self.assertIn("public.news", names)
        self.assertNotIn("orders", names)
        self.assertNotIn("orders", [q["name"] for q in st["queues"]])

    def test_max_connections(self):
        """A listener's max-connections: one more is closed at once, logged; a place that
        frees takes the next."""
        held = [socket.create_connection(("127.0.0.1", self.b.port), timeout=5) for _ in range(3)]
        time.sleep(0.2)
        extra = socket.create_connection(("127.0.0.1", self.b.port), timeout=5)
        self.assertEqual(extra.recv(16), b"")  # closed by the broker
        extra.close()
        self.assertTrue(wait_for(lambda: "max-connections (3) are open" in self.b.log_text(), 5))
        held.pop().close()
        time.sleep(0.3)
        r = mqr("send", "--url", self.url, "--allow-unrouted", "--body", "x", "public.limits")
        self.assertEqual(r.returncode, 0)
        for h in held:
            h.close()

    def test_management_needs_manage(self):
        for args in (["queue", "purge", "orders"], ["queue", "purge", "public.news"],
                     ["address", "create", "x", "ANYCAST"], ["queue", "delete", "public.news"]):
            r = mqr(*(args + ["--url", self.url]), check=False)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn("EPERM", r.stderr, args)
        r = mqr("queue", "browse", "public.news", "--url", self.url, check=False)  # browse: guest may
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    MQRD, MQR = sys.argv[1], sys.argv[2]
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
