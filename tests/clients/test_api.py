"""The management API against a real mqrd with users and security-settings: who may see
and change what (a watcher sees and browses orders.* and nothing else, gets 403 for a
purge and 404 for what it may not see; admin does all), Basic over TLS only, the
cross-site guard (X-Requested-With, Origin), a connection listed and closed (an MQTT
client's, by its user), server-side paging and search over 3,000 queues, a retry from a
dead-letter queue after real redeliveries, and bad bodies, paths and methods; the console's session (cookie, CSRF token, logout).

usage: test_api.py MQRD MQR"""

import base64
import http.client
import json
import os
import re
import ssl
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, run_mqr, self_signed, wait_for  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402
import stomp  # noqa: E402

MQRD, MQR = sys.argv[1], sys.argv[2]
DIR = tempfile.mkdtemp(prefix="mqr-api-")


def path(name):
    return os.path.join(DIR, name)


def mqr(*args):
    return run_mqr(MQR, *args)


CONFIG = """
listeners:
  - {name: shared, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp, http], anycast-prefix: /queue/}
  - name: webs
    host: 127.0.0.1
    port: 0
    protocols: [http]
    tls: {cert: CERT, key: KEY}
security:
  users-file: USERS
  allow-anonymous: false
  security-settings:
    'orders.#': {send: [admin, watcher], consume: [admin, watcher], browse: [watcher, admin], manage: [admin]}
    '#': {send: [admin], consume: [admin], browse: [admin], manage: [admin], create-address: [admin],
          create-durable-queue: [admin], create-non-durable-queue: [admin]}
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
  'orders.#': {dead-letter-address: DLA, max-delivery-attempts: 2, auto-create-dead-letter-resources: true}
addresses:
  orders.eu: {anycast: [orders.eu]}
  billing: {anycast: [billing]}
""" + "".join("  many.%d: {anycast: [many.%d]}\n" % (i, i) for i in range(3000))

ADMIN, WATCHER = ("admin", "adminpw"), ("watcher", "watchpw")


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        self_signed(DIR)
        mqr("user", "add", "--users-file", path("users"), "admin", "--roles", "admin", "--password", "adminpw")
        mqr("user", "add", "--users-file", path("users"), "watcher", "--roles", "watcher", "--password", "watchpw")
        cls.b = Mqrd(MQRD, CONFIG.replace("CERT", path("cert.pem")).replace("KEY", path("key.pem"))
                     .replace("USERS", path("users")))
        line = [x for x in cls.b.log_text().split("\n") if "ready on" in x][-1]
        cls.shared = int(re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1))
        cls.webs = int(re.search(r"https://127\.0\.0\.1:(\d+)", line).group(1))
        cls.tls = ssl.create_default_context(cafile=path("cert.pem"))

    @classmethod
    def tearDownClass(cls):
        cls.b.stop_clean(DIR)

    def call(self, method, url, user=ADMIN, body=None, headers=None, port=None, secure=True):
        h = {} if headers is None else dict(headers)
        if user:
            h["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % user).encode()).decode()
        if method in ("POST", "DELETE") and headers is None:
            h["X-Requested-With"] = "test"
        if secure:
            c = http.client.HTTPSConnection("localhost", port or self.webs, context=self.tls, timeout=15)
        else:
            c = http.client.HTTPConnection("127.0.0.1", port or self.shared, timeout=15)
        c.request(method, url, body=None if body is None else json.dumps(body) if not isinstance(body, bytes) else body,
                  headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data

    def test_permissions(self):
        status, got = self.call("GET", "/api/v1/addresses?limit=1000", user=WATCHER)
        self.assertEqual(status, 200)
        self.assertEqual([a["name"] for a in got["addresses"]], ["orders.eu"])  # nothing else
        self.assertEqual(self.call("GET", "/api/v1/queues/billing", user=WATCHER)[0], 404)  # not seen: not found
        self.assertEqual(self.call("GET", "/api/v1/queues/orders.eu/messages", user=WATCHER)[0], 200)
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge", user=WATCHER)
        self.assertEqual((status, got["code"]), (403, "EPERM"))
        self.assertEqual(self.call("POST", "/api/v1/queues/billing/purge", user=WATCHER)[0], 404)
        self.assertEqual(self.call("GET", "/api/v1/connections", user=WATCHER)[0], 403)
        status, got = self.call("POST", "/api/v1/addresses", user=WATCHER,
                                body={"name": "orders.us", "routing-types": ["ANYCAST"]})
        self.assertEqual(status, 403)
        self.assertEqual(self.call("POST", "/api/v1/queues/orders.eu/purge")[0], 200)  # admin
        self.assertEqual(self.call("GET", "/api/v1/queues", user=("watcher", "wrong"))[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/queues", user=None)[0], 401)  # anonymous refused here

    def test_basic_only_over_tls(self):
        status, got = self.call("GET", "/api/v1/broker", secure=False)
        self.assertEqual(status, 403)

    def test_cross_site_guard(self):
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge", headers={})
        self.assertEqual((status, got["code"]), (403, "EPERM"))
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge",
                                headers={"X-Requested-With": "x", "Origin": "https://evil.example"})
        self.assertEqual(status, 403)
        self.assertIn("own origin", got["error"])
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge",
                                headers={"X-Requested-With": "x", "Origin": "https://localhost:%d" % self.webs})
        self.assertEqual(status, 200)
        self.assertEqual(self.call("GET", "/api/v1/queues/orders.eu", headers={})[0], 200)  # a look needs neither

    def test_paging_and_search(self):
        status, got = self.call("GET", "/api/v1/queues?search=many.1&offset=10&limit=5")
        self.assertEqual(status, 200)
        self.assertEqual(got["total"], 1111)  # many.1, many.10-19, many.100-199, many.1000-1999
        self.assertEqual(len(got["queues"]), 5)
        for i, n in ((17, 3), (2017, 5), (99, 1)):  # deepest first, then by name
            mqr("send", "--url", "tcp://admin:adminpw@127.0.0.1:%d" % self.shared, "--count", str(n), "many.%d" % i)
        status, got = self.call("GET", "/api/v1/queues?search=many.&sort=message-count&limit=4")
        self.assertEqual([(q["name"], q["message-count"]) for q in got["queues"]],
                         [("many.2017", 5), ("many.17", 3), ("many.99", 1), ("many.0", 0)])
        self.assertEqual(got["total"], 3000)
        status, got = self.call("GET", "/api/v1/queues?search=many.&sort=name&offset=1&limit=2")
        self.assertEqual([q["name"] for q in got["queues"]], ["many.1", "many.10"])
        self.assertEqual(self.call("GET", "/api/v1/queues?sort=colour")[0], 400)
        status, got = self.call("GET", "/api/v1/queues?search=no-such-queue&sort=name")  # none to sort
        self.assertEqual((status, got["total"], got["queues"]), (200, 0, []))
        for i in (17, 2017, 99):
            self.call("POST", "/api/v1/queues/many.%d/purge" % i)
        status, got = self.call("GET", "/api/v1/queues?limit=100000")
        self.assertEqual(got["limit"], 1000)
        self.assertEqual(len(got["queues"]), 1000)
        self.assertGreaterEqual(got["total"], 3002)

    def test_connection_listed_and_closed(self):
        gone = []
        c = paho.Client(client_id="api-watcher", protocol=paho.MQTTv311)
        c.username_pw_set(*WATCHER)
        c.on_disconnect = lambda *a: gone.append(1)
        c.connect("127.0.0.1", self.shared)
        c.loop_start()
        try:
            self.assertTrue(wait_for(lambda: any(
                x["user"] == "watcher" for x in self.call("GET", "/api/v1/connections?search=watcher")[1]["connections"])))
            conns = self.call("GET", "/api/v1/connections?search=MQTT")[1]["connections"]
            mine = [x for x in conns if x["user"] == "watcher"][0]
            self.assertEqual((mine["protocol"], mine["listener"], mine["tls"]), ("MQTT", "shared", False))
            status, got = self.call("DELETE", "/api/v1/connections/%d" % mine["id"])
            self.assertEqual((status, got), (200, {"closed": mine["id"]}))
            self.assertTrue(wait_for(lambda: gone))
            self.assertEqual(self.call("DELETE", "/api/v1/connections/%d" % mine["id"])[0], 404)
            self.assertIn("closed through the management API", self.b.log_text())
        finally:
            c.loop_stop()

    def test_retry_from_dead_letters(self):
        """Messages rolled back max-delivery-attempts times go to DLA's queue for orders.eu;
        retry puts them back in orders.eu."""
        conn = stomp.Connection12([("127.0.0.1", self.shared)], heartbeats=(0, 0))
        conn.connect("admin", "adminpw", wait=True)
        for i in range(3):
            conn.send("/queue/orders.eu", "dead %d" % i)
        got = []

        class L(stomp.ConnectionListener):
            def on_message(self, frame):
                got.append(frame.headers["message-id"])
                conn.nack(frame.headers["ack"])

        conn.set_listener("", L())
        conn.subscribe("/queue/orders.eu", id="1", ack="client-individual")
        dlq = "DLQ.orders.eu"  # (Artemis's dead-letter-queue-prefix)
        self.assertTrue(wait_for(lambda: self.call("GET", "/api/v1/queues/" + dlq)[1].get("message-count") == 3, 15),
                        self.call("GET", "/api/v1/queues?search=orders.eu")[1])
        conn.unsubscribe("1")
        status, got_retry = self.call("POST", "/api/v1/queues/%s/retry" % dlq)
        self.assertEqual((status, got_retry), (200, {"retried": 3, "origins-left": []}))
        status, q = self.call("GET", "/api/v1/queues/orders.eu")
        self.assertEqual(q["message-count"], 3)
        status, msgs = self.call("GET", "/api/v1/queues/orders.eu/messages")
        self.assertEqual(sorted(m["body"] for m in msgs["messages"]), ["dead 0", "dead 1", "dead 2"])
        self.assertEqual(self.call("GET", "/api/v1/queues/" + dlq)[1]["message-count"], 0)
        conn.disconnect()
        self.call("POST", "/api/v1/queues/orders.eu/purge")

    def test_console_session(self):
        """A session cookie after one Basic login: HttpOnly, SameSite=Strict, Secure; a change
        made with it needs its CSRF token; a logout ends it; a script's 401 has no challenge."""
        c = http.client.HTTPSConnection("localhost", self.webs, context=self.tls, timeout=15)
        auth = "Basic " + base64.b64encode(b"admin:adminpw").decode()
        c.request("POST", "/api/v1/session", headers={"Authorization": auth, "X-Requested-With": "t"})
        r = c.getresponse()
        body = json.loads(r.read())
        self.assertEqual(r.status, 201)
        cookie = r.getheader("Set-Cookie")
        for attr in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/"):
            self.assertIn(attr, cookie)
        token = cookie.split(";")[0]
        csrf = body["csrf"]
        self.assertEqual(len(csrf), 64)
        jar = {"Cookie": token, "X-Requested-With": "t"}
        self.assertEqual(self.call("GET", "/api/v1/session", user=None, headers=jar)[1]["user"], "admin")
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge", user=None, headers=jar)
        self.assertEqual(status, 403)
        self.assertIn("X-CSRF-Token", got["error"])
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge", user=None,
                                headers=dict(jar, **{"X-CSRF-Token": "0" * 64}))
        self.assertEqual(status, 403)
        status, got = self.call("POST", "/api/v1/queues/orders.eu/purge", user=None,
                                headers=dict(jar, **{"X-CSRF-Token": csrf}))
        self.assertEqual(status, 200)
        status, got = self.call("DELETE", "/api/v1/session", user=None, headers=dict(jar, **{"X-CSRF-Token": csrf}))
        self.assertEqual((status, got["ended"]), (200, True))
        c = http.client.HTTPSConnection("localhost", self.webs, context=self.tls, timeout=15)
        c.request("GET", "/api/v1/queues", headers=jar)
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 401)  # the session is gone
        self.assertIsNone(r.getheader("WWW-Authenticate"))  # a script asked: no browser dialog
        status, got = self.call("POST", "/api/v1/session", user=None, headers={"X-Requested-With": "t",
                                                                                "Cookie": "mqr_session=" + "a" * 64})
        self.assertEqual(status, 401)  # no session, no anonymous here
        self.assertEqual(self.call("POST", "/api/v1/session", secure=False)[0], 403)  # a password over plaintext

    def test_bad_requests(self):
        status, got = self.call("POST", "/api/v1/addresses", body=b"{not json")
        self.assertEqual((status, got["code"]), (400, "EINVAL"))
        status, got = self.call("POST", "/api/v1/addresses", body={"name": "x", "routing-types": ["BROADCAST"]})
        self.assertEqual(status, 400)
        status, got = self.call("POST", "/api/v1/queues", body={"name": "q1", "routing-type": "ANYCAST",
                                                                "options": {"ring-size": "lots"}})
        self.assertEqual((status, got["code"]), (400, "EINVAL"))
        self.assertIn("ring-size", got["error"])
        status, got = self.call("POST", "/api/v1/queues", body={"name": "q1", "routing-type": "ANYCAST",
                                                                "options": {"colour": "red"}})
        self.assertEqual(status, 400)
        self.assertEqual(self.call("GET", "/api/v1/nothing")[0], 404)
        self.assertEqual(self.call("GET", "/api/v1/queues/%ZZ")[0], 404)
        self.assertEqual(self.call("GET", "/api/v1/queues/a%00b")[0], 404)
        self.assertEqual(self.call("PUT", "/api/v1/queues")[0], 405)
        status, got = self.call("DELETE", "/api/v1/addresses/orders.eu")  # has its queue
        self.assertEqual((status, got["code"]), (409, "EADDRHASQUEUES"))
        status, got = self.call("POST", "/api/v1/queues/orders.eu/move", body={"to": "orders.eu"})
        self.assertEqual(status, 400)
        status, got = self.call("POST", "/api/v1/queues/orders.eu/frobnicate")
        self.assertEqual(status, 404)
        self.assertEqual(self.call("GET", "/api/v1/broker")[0], 200)  # serving on


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
