"""The HTTP head against a real mqrd: /healthz, /readyz and /metrics (parsed by the
Prometheus client library's own parser, and its figures following real MQTT, STOMP and
mqr traffic), authentication (Basic over TLS only, 401 with its challenge, anonymous
probes), a user's metrics limited to what it may browse, HTTP on the shared port beside
the other protocols, keep-alive and pipelining; and the bad input an HTTP server must
refuse cleanly, the broker serving on: a malformed request (400), headers too large
(431), a body too large (413), a request that never ends (408), a silent connection.

usage: test_http.py MQRD MQR"""

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, raw_closed, run_mqr, self_signed, wait_for  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402
import stomp  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

MQRD, MQR = sys.argv[1], sys.argv[2]
DIR = tempfile.mkdtemp(prefix="mqr-http-")


def path(name):
    return os.path.join(DIR, name)


def mqr(*args):
    return run_mqr(MQR, *args)


CONFIG = """
listeners:
  - {name: shared, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp, http], anycast-prefix: /queue/}
  - name: web
    host: 127.0.0.1
    port: 0
    protocols: [http]
    http: {max-header-size: 2KiB, max-body-size: 1KiB, request-timeout: 2s, keep-alive-timeout: 1s}
  - name: webs
    host: 127.0.0.1
    port: 0
    protocols: [http]
    tls: {cert: CERT, key: KEY}
  - name: open
    host: 127.0.0.1
    port: 0
    protocols: [http]
    http: {anonymous-metrics: true, anonymous-health: false}
security:
  users-file: USERS
  allow-anonymous: false
  security-settings:
    'orders.#': {send: [admin], consume: [admin], browse: [watcher, admin], manage: [admin]}
    '#': {send: [admin], consume: [admin], browse: [admin], manage: [admin], create-address: [admin],
          create-durable-queue: [admin], create-non-durable-queue: [admin]}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
addresses:
  orders.eu: {anycast: [orders.eu]}
  billing: {anycast: [billing]}
""" + "".join("  many.%d: {anycast: [many.%d]}\n" % (i, i) for i in range(3000))


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


class Http(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        self_signed(DIR)
        mqr("user", "add", "--users-file", path("users"), "admin", "--roles", "admin", "--password", "adminpw")
        mqr("user", "add", "--users-file", path("users"), "watcher", "--roles", "watcher", "--password", "watchpw")
        config = (CONFIG.replace("CERT", path("cert.pem")).replace("KEY", path("key.pem"))
                  .replace("USERS", path("users")))
        cls.b = Mqrd(MQRD, config)
        text = cls.b.log_text()
        line = [x for x in text.split("\n") if "ready on" in x][-1]
        cls.shared = int(re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1))
        http_ports = [int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)", line)]
        cls.web, cls.open = http_ports
        cls.webs = int(re.search(r"https://127\.0\.0\.1:(\d+)", line).group(1))
        cls.tls = ssl.create_default_context(cafile=path("cert.pem"))

    @classmethod
    def tearDownClass(cls):
        cls.b.stop_clean(DIR)

    def get(self, port, url, headers=None, method="GET", body=None, tls=False):
        c = (http.client.HTTPSConnection("localhost", port, context=self.tls, timeout=10) if tls
             else http.client.HTTPConnection("127.0.0.1", port, timeout=10))
        c.request(method, url, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r, data

    def metrics(self, port=None, headers=None, tls=False):
        r, data = self.get(port or self.webs, "/metrics", headers if headers is not None else basic("admin", "adminpw"),
                           tls=tls if port else True)
        self.assertEqual(r.status, 200, data)
        self.assertEqual(r.getheader("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        out = {}
        for fam in text_string_to_metric_families(data.decode()):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out, data.decode()

    def queue_metric(self, m, name, queue):
        for (n, labels), v in m.items():
            if n == name and dict(labels).get("queue") == queue:
                return v
        return None

    # ---- health -------------------------------------------------------------------------

    def test_health_and_readiness_answer_anonymously(self):
        for url, body in (("/healthz", b"ok\n"), ("/readyz", b"ready\n")):
            r, data = self.get(self.web, url)
            self.assertEqual((r.status, data), (200, body))
            self.assertEqual(r.getheader("Cache-Control"), "no-store")
            r, data = self.get(self.web, url, method="HEAD")
            self.assertEqual((r.status, data, r.getheader("Content-Length")), (200, b"", str(len(body))))

    def test_health_can_be_closed_to_anonymous(self):
        r, _ = self.get(self.open, "/healthz")
        self.assertEqual(r.status, 401)
        self.assertIn("Basic", r.getheader("WWW-Authenticate"))

    def test_unknown_path_and_method(self):
        r, data = self.get(self.web, "/nothing")
        self.assertEqual(r.status, 404)
        r, data = self.get(self.web, "/healthz", method="POST", body=b"x")
        self.assertEqual(r.status, 405)
        self.assertEqual(r.getheader("Allow"), "GET, HEAD")

    # ---- metrics ------------------------------------------------------------------------

    def test_metrics_need_credentials(self):
        r, _ = self.get(self.web, "/metrics")
        self.assertEqual(r.status, 401)
        self.assertEqual(r.getheader("WWW-Authenticate"), 'Basic realm="mqrd", charset="UTF-8"')
        r, _ = self.get(self.webs, "/metrics", basic("admin", "wrong"), tls=True)
        self.assertEqual(r.status, 401)
        r, data = self.get(self.web, "/metrics", basic("admin", "adminpw"))
        self.assertEqual(r.status, 403, "Basic over plaintext must be refused")
        self.assertIn(b"TLS", data)
        self.assertIn("security: authentication of 'admin'", self.b.log_text())

    def test_metrics_open_to_anonymous_by_config(self):
        m, _ = self.metrics(self.open, headers={})
        self.assertIsNotNone(self.queue_metric(m, "artemis_message_count", "billing"))

    def test_metrics_follow_traffic_on_every_head(self):
        before, _ = self.metrics()
        added0 = self.queue_metric(before, "artemis_messages_added", "orders.eu")
        conn = stomp.Connection([("127.0.0.1", self.shared)], heartbeats=(0, 0))
        conn.connect("admin", "adminpw", wait=True)
        for i in range(3):
            conn.send("/queue/orders.eu", "stomp %d" % i, headers={"receipt": "r%d" % i})
        time.sleep(0.3)
        conn.disconnect()
        mqr("send", "--url", "tcp://admin:adminpw@127.0.0.1:%d" % self.shared, "--routing-type", "ANYCAST",
            "--body", "native", "orders.eu")
        m, text = self.metrics()
        self.assertEqual(self.queue_metric(m, "artemis_messages_added", "orders.eu"), added0 + 4)
        self.assertGreaterEqual(self.queue_metric(m, "artemis_message_count", "orders.eu"), 4)
        self.assertGreater(self.queue_metric(m, "artemis_persistent_size", "orders.eu"), 4 * len("stomp 0"))
        self.assertEqual(self.queue_metric(m, "artemis_persistent_size", "billing"), 0)
        self.assertEqual(m[("artemis_routed_message_count", (("address", "orders.eu"), ("broker", socket.gethostname())))] >= 4,
                         True)
        self.assertRegex(text, r'\nartemis_message_count\{address="orders.eu",broker="[^"]+",queue="orders.eu"\} \d+\n')
        # A consumer shows in consumer_count while it is there.
        c = paho.Client(client_id="watcher-sub", protocol=paho.MQTTv311)
        c.username_pw_set("admin", "adminpw")
        c.connect("127.0.0.1", self.shared)
        c.loop_start()
        try:
            def mqtt_counted():
                m2, _ = self.metrics()
                return m2.get(("mqr_connections", (("broker", socket.gethostname()), ("protocol", "mqtt")))) == 1
            self.assertTrue(wait_for(mqtt_counted))
        finally:
            c.loop_stop()
            c.disconnect()

    def test_a_user_sees_what_it_may_browse(self):
        m, text = self.metrics(headers=basic("watcher", "watchpw"))
        self.assertIsNotNone(self.queue_metric(m, "artemis_message_count", "orders.eu"))
        self.assertIsNone(self.queue_metric(m, "artemis_message_count", "billing"))
        self.assertNotIn('address="billing"', text)
        m, _ = self.metrics()
        self.assertIsNotNone(self.queue_metric(m, "artemis_message_count", "billing"))

    def test_a_large_answer_is_whole_and_in_order(self):
        """3000 queues: the answer is made a slice per loop pass and written in slices;
        every queue is in it once, and a request pipelined behind it is answered after it."""
        s = socket.create_connection(("127.0.0.1", self.webs), timeout=10)
        s = self.tls.wrap_socket(s, server_hostname="localhost")
        auth = basic("admin", "adminpw")["Authorization"].encode()
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth + b"\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        deadline = time.time() + 20
        while not got.endswith(b"\r\n\r\nok\n") and time.time() < deadline:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
        s.close()
        first, _, rest = got.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", first).group(1))
        body, second = rest[:length], rest[length:]
        self.assertTrue(second.startswith(b"HTTP/1.1 200 OK"), second[:100])
        self.assertTrue(second.endswith(b"ok\n"))
        text = body.decode()
        fams = list(text_string_to_metric_families(text))
        counts = [f for f in fams if f.name == "artemis_message_count"][0]
        queues = [x.labels["queue"] for x in counts.samples]
        self.assertEqual(len(queues), len(set(queues)))
        self.assertEqual(len([q for q in queues if q.startswith("many.")]), 3000)

    def test_broker_families(self):
        m, text = self.metrics()
        for name in ("artemis_connection_count", "mqr_authentications_total", "mqr_uptime_seconds",
                     "process_resident_memory_bytes", "mqr_build_info", "mqr_messages"):
            self.assertTrue(any(n == name for n, _ in m), name)
        self.assertIn("# TYPE artemis_message_count gauge", text)

    # ---- the shared port and keep-alive -------------------------------------------------

    def test_http_on_the_shared_port(self):
        r, data = self.get(self.shared, "/healthz")
        self.assertEqual((r.status, data), (200, b"ok\n"))

    def test_keep_alive_and_pipelining(self):
        s = socket.create_connection(("127.0.0.1", self.web), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        deadline = time.time() + 5
        while got.count(b"HTTP/1.1 200") < 2 and time.time() < deadline:
            got += s.recv(65536)
        self.assertEqual(got.count(b"HTTP/1.1 200 OK"), 2, got)
        self.assertTrue(got.endswith(b"ready\n"))
        # Still open after the answers; closed by the keep-alive-timeout (1 s) when idle.
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"200 OK", s.recv(65536))
        s.settimeout(5)
        t0 = time.time()
        self.assertEqual(s.recv(65536), b"")
        self.assertLess(time.time() - t0, 4)
        s.close()

    def test_connection_close_and_http_1_0(self):
        for req in (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"GET /healthz HTTP/1.0\r\n\r\n"):
            s, got, closed = raw_closed(self.web, req, timeout=3)
            s.close()
            self.assertTrue(closed)
            self.assertIn(b"200 OK", got)

    # ---- bad input ------------------------------------------------------------------------

    def assert_refused(self, data, status, timeout=5):
        s, got, closed = raw_closed(self.web, data, timeout=timeout)
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 %d " % status), got[:200])
        self.assertTrue(closed, "the connection must close after a %d" % status)
        r, _ = self.get(self.web, "/healthz")
        self.assertEqual(r.status, 200)

    def test_malformed_request(self):
        self.assert_refused(b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n", 400)
        self.assert_refused(b"GET /healthz HTTP/9.x\r\n\r\n", 400)
        self.assert_refused(b"GET /he\x00lthz HTTP/1.1\r\n\r\n", 400)

    def test_headers_too_large(self):
        self.assert_refused(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 4096 + b"\r\n\r\n", 431)
        many = b"".join(b"X-%d: 1\r\n" % i for i in range(100))
        self.assert_refused(b"GET /healthz HTTP/1.1\r\n" + many + b"\r\n", 431)

    def test_body_too_large(self):
        self.assert_refused(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n", 413)
        self.assert_refused(b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"800\r\n" + b"a" * 2048 + b"\r\n0\r\n\r\n", 413)

    def test_request_that_never_ends(self):
        self.assert_refused(b"GET /healthz HTTP/1.1\r\nHost: x\r\n", 408, timeout=5)
        self.assertIn("request-timeout", self.b.log_text())

    def test_hostile_length(self):
        self.assert_refused(b"POST /healthz HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400)


class JournalHistogram(unittest.TestCase):
    """With persistence, /metrics has the journal's write times as a Prometheus histogram
    that counts every write round, and the journal's families; and what the journal and
    the page files take on disk, and the room left there."""

    def test_write_seconds(self):
        data = tempfile.mkdtemp(prefix="mqr-http-journal-")
        b = Mqrd(MQRD, "security: {allow-anonymous: true}\npersistence: {directory: %s}\n"
                       "listeners:\n  - {name: m, host: 127.0.0.1, port: 0, protocols: [mqr, http],\n"
                       "     http: {anonymous-metrics: true}}\n"
                       "address-settings:\n  paged: {max-size-bytes: 8KiB, address-full-policy: PAGE}\n"
                       "addresses:\n  jobs: {anycast: [jobs]}\n  paged: {anycast: [paged]}\n" % data)
        try:
            for _ in range(3):
                mqr("send", "--url", "tcp://127.0.0.1:%d" % b.port, "--durable", "--body", "x", "jobs")
            mqr("send", "--url", "tcp://127.0.0.1:%d" % b.port, "--durable", "--count", "40", "--body", "p" * 1000,
                "paged")
            r, body = Http.get(self, b.port, "/metrics")
            self.assertEqual(r.status, 200)
            # The disk figures, against the directory as the kernel sees it.
            on_disk = sum(os.stat(os.path.join(data, f)).st_blocks * 512 for f in os.listdir(data) if f.endswith(".jrn"))
            vfs = os.statvfs(data)
        finally:
            self.assertEqual(b.stop(), 0)
            shutil.rmtree(data, ignore_errors=True)
        fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
        h = fams["mqr_journal_write_seconds"]
        self.assertEqual(h.type, "histogram")
        buckets = [x.value for x in h.samples if x.name.endswith("_bucket")]
        self.assertEqual(buckets, sorted(buckets), "buckets are cumulative")
        count = [x.value for x in h.samples if x.name.endswith("_count")][0]
        self.assertGreaterEqual(count, 3)
        self.assertEqual(buckets[-1], count)
        self.assertGreater([x.value for x in h.samples if x.name.endswith("_sum")][0], 0)
        value = lambda name: fams[name].samples[0].value
        self.assertTrue(3 < value("mqr_durable_messages") < 43)  # the journal's: not the paged ones
        self.assertEqual(value("mqr_journal_disk_bytes"), on_disk)
        self.assertGreaterEqual(value("mqr_page_files"), 1)  # paged's messages past 8 KiB
        pages = {x.labels["address"]: x.value for x in fams["artemis_number_of_pages"].samples}
        self.assertEqual(pages["jobs"], 0)
        self.assertEqual(pages["paged"], value("mqr_page_files"))
        self.assertGreater(value("mqr_page_disk_bytes"), 0)
        self.assertEqual(value("mqr_disk_size_bytes"), vfs.f_blocks * vfs.f_frsize)
        self.assertLess(abs(value("mqr_disk_free_bytes") - vfs.f_bavail * vfs.f_frsize), 0.05 * value("mqr_disk_size_bytes"))


class SysTopics(unittest.TestCase):
    """$SYS/broker/... as mosquitto publishes them, retained, every sys-interval; a
    subscription to them needs browse; '#' does not match them [MQTT-4.7.2-1]."""

    def test_sys_topics(self):
        home = tempfile.mkdtemp(prefix="mqr-sys-")
        self.addCleanup(shutil.rmtree, home, True)
        users = os.path.join(home, "users")
        mqr("user", "add", "--users-file", users, "ops", "--roles", "ops", "--password", "opspw")
        mqr("user", "add", "--users-file", users, "app", "--roles", "app", "--password", "apppw")
        b = Mqrd(MQRD, "security:\n  users-file: %s\n  security-settings:\n"
                       "    '#': {send: [app, ops], consume: [app, ops], browse: [ops],\n"
                       "          create-address: [app, ops], create-non-durable-queue: [app, ops],\n"
                       "          delete-non-durable-queue: [app, ops]}\n"
                       "address-settings:\n  '#': {auto-create-addresses: true, auto-create-queues: true}\n"
                       "listeners:\n  - {name: m, host: 127.0.0.1, port: 0, protocols: [mqtt],"
                       " mqtt: {sys-interval: 300ms}}\n" % users)
        try:
            def client(user, pw, topic):
                got, granted = [], []
                c = paho.Client(client_id="sys-%s-%d" % (user, len(topic)), protocol=paho.MQTTv311)
                c.username_pw_set(user, pw)
                c.on_message = lambda cl, ud, m: got.append((m.topic, m.payload.decode()))
                c.on_subscribe = lambda cl, ud, mid, qos: granted.extend(qos)
                c.connect("127.0.0.1", b.port)
                c.loop_start()
                c.subscribe(topic, 0)
                self.assertTrue(wait_for(lambda: granted))
                return c, got, granted
            time.sleep(0.5)
            ops, ops_got, ops_granted = client("ops", "opspw", "$SYS/broker/#")
            app, app_got, app_granted = client("app", "apppw", "$SYS/broker/#")
            every, every_got, _ = client("ops", "opspw", "#")
            pub = paho.Client(client_id="sys-pub", protocol=paho.MQTTv311)
            pub.username_pw_set("app", "apppw")
            pub.connect("127.0.0.1", b.port)
            pub.loop_start()
            pub.publish("x/y", b"hello").wait_for_publish()
            self.assertTrue(wait_for(lambda: ("x/y", "hello") in every_got))

            def saw(topic, pred):
                return any(t == topic and pred(v) for t, v in list(ops_got))
            self.assertTrue(wait_for(lambda: saw("$SYS/broker/version", lambda v: v.startswith("mqrd "))))
            self.assertTrue(wait_for(lambda: saw("$SYS/broker/uptime", lambda v: v.endswith(" seconds"))))
            self.assertTrue(wait_for(lambda: saw("$SYS/broker/messages/received", lambda v: int(v) >= 1)))
            self.assertTrue(wait_for(lambda: saw("$SYS/broker/messages/sent", lambda v: int(v) >= 1)))
            self.assertTrue(wait_for(lambda: saw("$SYS/broker/clients/connected", lambda v: int(v) >= 4)))
            self.assertTrue(wait_for(lambda: saw("$SYS/broker/bytes/received", lambda v: int(v) > 0)))
            self.assertTrue(any(t.startswith("$SYS/broker/load/messages/received/") for t, _ in ops_got))
            self.assertEqual(ops_granted, [0])
            self.assertEqual(app_granted, [128], "$SYS needs browse")
            self.assertEqual(app_got, [])
            self.assertFalse(any(t.startswith("$SYS") for t, _ in every_got), "'#' does not match $SYS")
            for c in (ops, app, every, pub):
                c.loop_stop()
                c.disconnect()
        finally:
            self.assertEqual(b.stop(), 0)


class JsonLog(unittest.TestCase):
    """log: {format: json, level: debug}: every line one JSON object with time, level,
    component and message, and a connection's lines with its id and peer; a reload to
    level warn keeps the info lines out."""

    def test_json_lines(self):
        b = Mqrd(MQRD, "log: {format: json, level: debug}\nsecurity: {allow-anonymous: true}\n"
                       "listeners:\n  - {name: m, host: 127.0.0.1, port: 0, protocols: [mqr, http]}\n")
        try:
            r, _ = self.get(b.port, "/healthz")
            self.assertEqual(r.status, 200)
            s, got, _ = raw_closed(b.port, b"GET /x HTTP/1.1\r\nHost x\r\n\r\n", timeout=3)
            s.close()
            self.assertTrue(wait_for(lambda: "HTTP 400" in b.log_text()))
            with open(b.path, "w") as f:
                f.write("log: {format: json, level: warn}\nsecurity: {allow-anonymous: true}\n"
                        "listeners:\n  - {name: m, host: 127.0.0.1, port: 0, protocols: [mqr, http]}\n")
            b.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_for(lambda: "reload: done" in b.log_text() or "reload" in b.log_text()))
            time.sleep(0.3)
            mark = len(b.log_text())
            r, _ = self.get(b.port, "/healthz")
            time.sleep(0.3)
            after = b.log_text()[mark:]
        finally:
            self.assertEqual(b.stop(), 0)
        lines = [json.loads(x) for x in b.log_text().splitlines() if x.strip()]
        self.assertTrue(lines)
        for x in lines:
            self.assertEqual(set(x) - {"connection", "peer"}, {"time", "level", "component", "message"}, x)
            self.assertRegex(x["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertIn(x["level"], ("error", "warn", "info", "debug"))
        bad = [x for x in lines if "HTTP 400" in x["message"]]
        self.assertEqual(len(bad), 1, lines)
        self.assertEqual(bad[0]["component"], "connection")
        self.assertIsInstance(bad[0]["connection"], int)
        self.assertRegex(bad[0]["peer"], r"^127\.0\.0\.1:\d+$")
        self.assertTrue(any(x["component"] == "listener" for x in lines))
        self.assertNotIn('"level":"debug"', after, "a reload to warn keeps debug lines out")

    get = Http.get


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
