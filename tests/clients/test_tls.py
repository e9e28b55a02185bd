"""TLS on every head, against a real mqrd with the real clients: openssl s_client,
mosquitto_pub (--cafile, --cert/--key), paho-mqtt and stomp.py over TLS; client
certificates as identity (client-auth need); and what must be refused cleanly, the broker
serving on: a plaintext client on the TLS port, a TLS client on the plaintext port, a
certificate of another CA, a self-signed one, an expired one, no certificate where one is
needed, a handshake that never finishes, a renegotiation. SIGHUP reads the certificate
again without dropping connections. Certificates are made here (python3-cryptography).

usage: test_tls.py MQRD MQR"""

import datetime
import os
import shutil
import signal
import socket
import random
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import paho.mqtt.client as mqtt
import stomp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd, raw_closed, wait_for  # noqa: E402

MQRD, MQR = None, None
DIR = tempfile.mkdtemp(prefix="mqr-tls-")


def path(name):
    return os.path.join(DIR, name)


def make_cert(name, cn, issuer=None, ca=False, days=30, expired=False, san=None):
    """A key and certificate written as NAME.key and NAME.pem; issuer (key, cert) signs it
    (None: self-signed). Returns (key, cert)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)) if expired else (
        now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days))
    b = (x509.CertificateBuilder().subject_name(subject)
         .issuer_name(issuer[1].subject if issuer else subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    cert = b.sign(issuer[0] if issuer else key, hashes.SHA256())
    with open(path(name + ".key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(path(name + ".pem"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def make_all():
    ca = make_cert("ca", "mqr test CA", ca=True)
    san = [x509.DNSName("localhost"), x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]
    make_cert("server", "localhost", issuer=ca, san=san)
    make_cert("server2", "localhost-renewed", issuer=ca, san=san)
    make_cert("alice", "alice", issuer=ca)
    make_cert("mallory", "mallory", issuer=ca)
    rogue = make_cert("rogue-ca", "rogue CA", ca=True)
    make_cert("rogue", "alice", issuer=rogue)
    make_cert("self", "alice")
    make_cert("expired", "alice", issuer=ca, expired=True)


def mqr(*args, check=True, stdin=None):
    r = subprocess.run([MQR] + list(args), capture_output=True, text=True, timeout=60, input=stdin)
    if check and r.returncode != 0:
        raise AssertionError("mqr %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


CONFIG = """
listeners:
  - {name: plain, host: 127.0.0.1, port: 0, protocols: [mqr, mqtt, stomp, amqp]}
  - name: tls
    host: 127.0.0.1
    port: 0
    protocols: [mqr, mqtt, stomp, amqp]
    handshake-timeout: 1s
    anycast-prefix: /queue/
    tls: {cert: server.pem, key: server.key}
  - name: mutual
    host: 127.0.0.1
    port: 0
    protocols: [mqr, mqtt, stomp, amqp]
    tls: {cert: server.pem, key: server.key, ca: ca.pem, client-auth: need, min-version: "1.2"}
security:
  users-file: users
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
"""


def s_client(port, *extra, stdin=b"", timeout=10):
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile", path("ca.pem"),
                        "-servername", "localhost"] + list(extra), input=stdin, capture_output=True,
                       timeout=timeout)
    return r.returncode, (r.stdout + r.stderr).decode("utf-8", "replace")


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        make_all()
        mqr("user", "add", "--users-file", path("users"), "alice", "--roles", "admin", "--password", "wonderland")
        with open(path("mqrd.yaml"), "w") as f:
            f.write(CONFIG)
        cls.b = Mqrd(MQRD, CONFIG.replace("server.pem", path("server.pem")).replace("server.key", path("server.key"))
                     .replace("ca.pem", path("ca.pem")).replace("users-file: users", "users-file: " + path("users")))
        text = cls.b.log_text()
        import re
        ports = [int(p) for p in re.findall(r"tls://127\.0\.0\.1:(\d+)", text)]
        cls.tls, cls.mutual = ports[-2], ports[-1]

    @classmethod
    def tearDownClass(cls):
        cls.b.stop_clean(DIR)

    def test_s_client_verifies_the_server(self):
        for v in ("-tls1_2", "-tls1_3"):
            rc, out = s_client(self.tls, v, stdin=b"")
            self.assertIn("Verify return code: 0 (ok)", out, v)
            self.assertIn("CN = localhost", out, v)

    def test_mosquitto_pub_with_cafile(self):
        r = subprocess.run(["mosquitto_pub", "-h", "localhost", "-p", str(self.tls), "--cafile", path("ca.pem"),
                            "-u", "alice", "-P", "wonderland", "-t", "tls/a", "-m", "hello", "-q", "1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_paho_over_tls(self):
        got, ev = [], threading.Event()
        c = mqtt.Client(client_id="paho-tls", protocol=mqtt.MQTTv311)
        c.tls_set(ca_certs=path("ca.pem"))
        c.username_pw_set("alice", "wonderland")
        c.on_message = lambda cl, u, m: (got.append(m.payload), ev.set())
        c.connect("localhost", self.tls, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        c.subscribe("tls/paho", 1)
        time.sleep(0.3)
        big = b"x" * 100000  # many records both ways
        c.publish("tls/paho", big, qos=1)
        self.assertTrue(ev.wait(10))
        self.assertEqual(got[0], big)
        c.loop_stop()
        c.disconnect()

    def test_stomp_over_ssl(self):
        conn = stomp.Connection12([("localhost", self.tls)])
        conn.set_ssl([("localhost", self.tls)], ca_certs=path("ca.pem"))
        got = []

        class L(stomp.ConnectionListener):
            def on_message(self, frame):
                got.append(frame.body)

        conn.set_listener("l", L())
        conn.connect("alice", "wonderland", wait=True)
        conn.subscribe("/queue/tls.stomp", id="1", ack="auto")
        conn.send("/queue/tls.stomp", "over tls")
        self.assertTrue(wait_for(lambda: got, 10))
        self.assertEqual(got[0], "over tls")
        conn.disconnect()

    def test_plaintext_on_the_tls_port(self):
        """A plaintext MQTT CONNECT on the TLS port: refused by the handshake, logged."""
        connect = bytes([0x10, 12]) + b"\x00\x04MQTT\x04\x02\x00\x3c\x00\x00"
        sock, got, closed = raw_closed(self.tls, connect, timeout=5)
        sock.close()
        self.assertTrue(closed)
        self.assertNotIn(b"\x20\x02", got)  # no CONNACK
        self.assertTrue(wait_for(lambda: "TLS handshake failed" in self.b.log_text(), 5))
        self.assertTrue(self.b.alive())

    def test_tls_on_the_plain_port(self):
        rc, out = s_client(self.b.port, timeout=10)
        self.assertNotEqual(rc, 0)
        self.assertTrue(wait_for(lambda: "start none of the protocols" in self.b.log_text(), 5))
        self.assertTrue(self.b.alive())

    def test_handshake_that_never_finishes(self):
        s = socket.create_connection(("127.0.0.1", self.tls), timeout=5)
        t0 = time.time()
        s.settimeout(5)
        self.assertEqual(s.recv(10), b"")  # closed by handshake-timeout (1 s)
        self.assertGreaterEqual(time.time() - t0, 0.9)
        s.close()

    def test_renegotiation_refused(self):
        rc, out = s_client(self.tls, "-tls1_2", stdin=b"R\n", timeout=10)
        self.assertIn("RENEGOTIATING", out)
        self.assertIn("no renegotiation", out)  # the server's alert
        self.assertTrue(self.b.alive())
        rc2, out2 = s_client(self.tls, "-tls1_2")  # and it serves on
        self.assertIn("Verify return code: 0 (ok)", out2)

    def with_certificate(self, name):
        """mosquitto_pub with NAME's certificate (None: none) on the client-auth need
        listener, no user name: its return code and output."""
        args = ["mosquitto_pub", "-h", "localhost", "-p", str(self.mutual), "--cafile", path("ca.pem"), "-t",
                "tls/mutual", "-m", "x", "-q", "1"]
        if name:
            args += ["--cert", path(name + ".pem"), "--key", path(name + ".key")]
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout + r.stderr

    def test_client_certificate_is_the_identity(self):
        rc, out = self.with_certificate("alice")
        self.assertEqual(rc, 0, out)  # CN alice: the user alice, no password
        rc, out = self.with_certificate("mallory")  # a good certificate naming no user
        self.assertNotEqual(rc, 0)
        self.assertTrue(wait_for(lambda: "client certificate of 'mallory'" in self.b.log_text(), 5))

    def test_bad_client_certificates(self):
        for name in (None, "rogue", "self", "expired"):
            rc, out = self.with_certificate(name)
            self.assertNotEqual(rc, 0, name)
        self.assertTrue(self.b.alive())
        log = self.b.log_text()
        self.assertIn("certificate", log)

    def test_mqr_over_tls(self):
        """mqr and libmqr-client: tls:// with --ca; the broker's certificate checked."""
        url = "tls://localhost:%d" % self.tls
        self.assertEqual(mqr("queue", "create", "tls.native", "tls.native", "ANYCAST", "--url", url, "--ca",
                             path("ca.pem"), check=False).returncode, 1)  # anonymous: refused (no allow-anonymous)
        r = mqr("stat", "--url", url, check=False)  # the system's CAs do not know ours
        self.assertEqual(r.returncode, 1)
        self.assertIn("the broker's certificate", r.stderr)
        r = mqr("stat", "--url", url, "--ca", path("rogue-ca.pem"), check=False)
        self.assertEqual(r.returncode, 1)
        # With a client certificate, the native protocol's identity is its CN: alice.
        murl = "tls://127.0.0.1:%d" % self.mutual
        tls = ["--ca", path("ca.pem"), "--cert", path("alice.pem"), "--key", path("alice.key")]
        mqr("queue", "create", "tls.native", "tls.native", "ANYCAST", "--url", murl, *tls)
        mqr("send", "--url", murl, "--body", "over tls", "tls.native", *tls)
        r = mqr("recv", "--url", murl, "--count", "1", "--timeout", "5", "tls.native", *tls)
        self.assertIn("over tls", r.stdout)
        r = mqr("stat", "--url", murl, "--ca", path("ca.pem"), "--cert", path("mallory.pem"), "--key",
                path("mallory.key"), check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("names no user", r.stderr)

    def test_backlog_over_tls(self):
        """Megabytes each way through TLS: a producer's burst (many records per read) and a
        backlog delivered in writes of many records, which go out in chunks; every body
        comes back byte for byte."""
        murl = "tls://127.0.0.1:%d" % self.mutual
        tls = ["--ca", path("ca.pem"), "--cert", path("alice.pem"), "--key", path("alice.key")]
        body = "".join(random.Random(7).choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(6000))
        with open(path("body.txt"), "w") as f:
            f.write(body)
        mqr("queue", "create", "tls.bulk", "tls.bulk", "ANYCAST", "--url", murl, *tls)
        mqr("send", "--url", murl, "--file", path("body.txt"), "--count", "400", "tls.bulk", *tls)
        r = mqr("recv", "--url", murl, "--count", "400", "--timeout", "10", "tls.bulk", *tls)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 400)
        self.assertTrue(all(line == body for line in lines))

    def test_plain_over_tls(self):
        """Over TLS the native protocol's password goes as SASL PLAIN, so a user whose hash
        came from elsewhere (no SCRAM keys) logs in too."""
        with open(path("users"), "a") as f:
            f.write("carol:$7$101$qtJtH8jngFBw8pk8$oPqmyjDlU7j4vBylhgrK5s1gvnEDgF4FmXS/tLT0LjbZSFcrgacvJfngDa1uab7Bhh"
                    "pNPeysY/1oYmBFL82ruA==\n")
        self.b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "security: reloaded" in self.b.log_text(), 10))
        url = "tls://localhost:%d" % self.tls
        r = mqr("stat", "--url", url, "--ca", path("ca.pem"), "--user", "carol", "--password", "pa55word")
        self.assertIn("connections=", r.stdout)
        r = mqr("stat", "--url", url, "--ca", path("ca.pem"), "--user", "carol", "--password", "nope", check=False)
        self.assertEqual(r.returncode, 1)

    def amqp(self, port, mech, user=None, cert=None, tls=True):
        """An AMQP 1.0 round trip (python3-qpid-proton) with SASL mechanism mech: the body back."""
        from proton import Message, SSLDomain, symbol
        from proton.reactor import LinkOption
        from proton.utils import BlockingConnection
        domain = None
        if tls:
            domain = SSLDomain(SSLDomain.MODE_CLIENT)
            domain.set_trusted_ca_db(path("ca.pem"))
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
            if cert:
                domain.set_credentials(path(cert + ".pem"), path(cert + ".key"), None)
        url = "%s://%slocalhost:%d" % ("amqps" if tls else "amqp", user + "@" if user else "", port)
        class Queue(LinkOption):  # (the capability 'queue': ANYCAST, on a listener without prefixes)
            def apply(self, link):
                (link.source if link.is_receiver else link.target).capabilities.put_object(symbol("queue"))

        c = BlockingConnection(url, timeout=10, ssl_domain=domain, allowed_mechs=mech, sasl_enabled=True)
        try:
            c.create_sender("amqp.%s" % mech, options=Queue()).send(Message(body=u"over %s" % mech))
            r = c.create_receiver("amqp.%s" % mech, options=Queue())
            m = r.receive(timeout=5)
            r.accept()
            return m.body
        finally:
            c.close()

    def test_amqp_sasl(self):
        """AMQP's SASL: PLAIN over TLS against the users-file, EXTERNAL with a client
        certificate; a wrong password, PLAIN without TLS and a certificate of no user refused."""
        self.assertEqual(self.amqp(self.tls, "PLAIN", "alice:wonderland"), u"over PLAIN")
        self.assertEqual(self.amqp(self.mutual, "EXTERNAL", cert="alice"), u"over EXTERNAL")
        for port, mech, user, cert, tls in ((self.tls, "PLAIN", "alice:wrong", None, True),
                                            (self.b.port, "PLAIN", "alice:wonderland", None, False),
                                            (self.b.port, "ANONYMOUS", None, None, False),
                                            (self.mutual, "EXTERNAL", None, "mallory", True)):
            with self.assertRaises(Exception, msg=(mech, user, cert)):
                self.amqp(port, mech, user, cert, tls)
        self.assertTrue(wait_for(lambda: "AMQP SASL authentication of 'alice' failed" in self.b.log_text(), 5))
        self.assertTrue(self.b.alive())

    def test_zz_reload_reads_the_certificate_again(self):
        """SIGHUP: new connections get the renewed certificate; one made before stays."""
        c = mqtt.Client(client_id="paho-stays", protocol=mqtt.MQTTv311)
        c.tls_set(ca_certs=path("ca.pem"))
        c.username_pw_set("alice", "wonderland")
        gone = threading.Event()
        c.on_disconnect = lambda *a: gone.set()
        c.connect("localhost", self.tls, keepalive=30)
        c.loop_start()
        self.assertTrue(wait_for(c.is_connected, 10))
        shutil.copy(path("server2.pem"), path("server.pem"))
        shutil.copy(path("server2.key"), path("server.key"))
        self.b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "TLS certificate and key read again" in self.b.log_text(), 10))
        rc, out = s_client(self.tls)
        self.assertIn("CN = localhost-renewed", out)
        self.assertFalse(gone.is_set())
        self.assertTrue(c.is_connected())
        c.loop_stop()
        c.disconnect()
        # A key that does not match keeps the certificate there was.
        shutil.copy(path("alice.key"), path("server.key"))
        self.b.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "kept the TLS certificate it had" in self.b.log_text(), 10))
        rc, out = s_client(self.tls)
        self.assertIn("CN = localhost-renewed", out)


if __name__ == "__main__":
    MQRD, MQR = sys.argv[1], sys.argv[2]
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
