"""A real mqrd for the client tests: started from a shell-like environment (default signal
dispositions) on 127.0.0.1 with an ephemeral port and a config of the test's own, its
port read from its log, stopped by PID. Also raw sockets, for what no client library
sends."""

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest


class Mqrd:
    def __init__(self, mqrd, config, data_dir=None, log_level="info", env=None):
        self.dir = tempfile.mkdtemp(prefix="mqr-clients-")
        self.path = os.path.join(self.dir, "mqrd.yaml")
        with open(self.path, "w") as f:
            f.write(config)
        self.log_path = os.path.join(self.dir, "mqrd.log")
        self.mqrd = mqrd
        self.data_dir = data_dir
        self.log_level = log_level
        self.env = dict(os.environ, **env) if env else None
        self.proc = None
        self.start()

    def start(self):
        args = [self.mqrd, "--config", self.path, "--log-level", self.log_level]
        if self.data_dir:
            args += ["--data-dir", self.data_dir]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env=self.env,
                                     restore_signals=True, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            text = self.log_text()
            ready = [m for m in re.finditer(r"ready on tcp://127\.0\.0\.1:(\d+)", text)]
            if ready and len(ready) > self.starts():
                self.port = int(ready[-1].group(1))
                line = text[ready[-1].start():].split("\n", 1)[0]
                tls = re.search(r"tls://127\.0\.0\.1:(\d+)", line)
                self.tls_port = int(tls.group(1)) if tls else None
                self._starts = len(ready)
                return
            if self.proc.poll() is not None:
                raise RuntimeError("mqrd exited: " + text[-2000:])
            time.sleep(0.05)
        raise RuntimeError("mqrd did not start: " + self.log_text()[-2000:])

    def starts(self):
        return getattr(self, "_starts", 0)

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        code = self.proc.returncode
        self.proc = None
        return code

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop_clean(self, directory=None):
        """A test class's end: stops it, removes directory, and fails unless it exited 0."""
        code = self.stop()
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
        if code != 0:
            raise AssertionError("mqrd exited %s: %s" % (code, self.log_text()[-3000:]))


def free_port():
    """A port nothing listens on now, on 127.0.0.1 (for a listener the test configures)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def self_signed(directory):
    """A self-signed P-256 certificate for localhost and 127.0.0.1: (cert.pem, key.pem) in directory."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def run_mqr(mqr, *args):
    """The mqr CLI, which must succeed: its CompletedProcess."""
    r = subprocess.run([mqr] + list(args), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("mqr %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def raw(port, data=b"", timeout=5.0):
    """Sends data on a new socket; returns (socket, what came back until the peer closed
    or timeout passed)."""
    s, got, _ = raw_closed(port, data, timeout)
    return s, got


def raw_closed(port, data=b"", timeout=5.0):
    """As raw, and whether the peer closed the connection within timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if data:
        s.sendall(data)
    got = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return s, got, False
        except ConnectionResetError:
            return s, got, True
        if not chunk:
            return s, got, True
        got += chunk
    return s, got, False


def held_by_tcp(sock, one, most=200000, timeout=2.0):
    """Sends `one` until the broker stops reading (a send blocks for timeout), at most
    `most` times: how many went, and whether it was held."""
    sock.settimeout(timeout)
    sent = 0
    try:
        for _ in range(most):
            sock.sendall(one)
            sent += 1
    except socket.timeout:
        return sent, True
    return sent, False


def reset(sock):
    """Closes with a reset (SO_LINGER 0), as a client that vanishes."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def wait_for(pred, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def run_node_client(mqrd, config, source_dir, package, script):
    """Starts mqrd on config, runs the node client script (tests/clients/SCRIPT PORT) with
    the npm packages of SOURCE_DIR/.deps/npm (package: one it needs), stops mqrd, and exits:
    0 when the script passed and mqrd stopped cleanly."""
    modules = os.path.join(source_dir, ".deps", "npm", "node_modules")
    if not os.path.isdir(os.path.join(modules, package)):
        print("no %s in %s: run scripts/deps.sh test" % (package, modules))
        sys.exit(1)
    broker = Mqrd(mqrd, config)
    try:
        env = dict(os.environ, NODE_PATH=modules)
        run = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), script),
                              str(broker.port)], env=env, timeout=120)
    finally:
        code = broker.stop()
    if code != 0:
        print("mqrd exited with %s:\n%s" % (code, broker.log_text()[-4000:]))
        sys.exit(1)
    sys.exit(run.returncode)


def run_suite(config, module):
    """Starts mqrd (sys.argv[1]) on config, sets module.BROKER, runs the module's unittest
    cases, stops mqrd, and exits: 0 when every case passed and mqrd stopped cleanly."""
    module.BROKER = Mqrd(sys.argv[1], config)
    try:
        result = unittest.main(module=module, argv=[sys.argv[0], "-v"], exit=False).result
    finally:
        code = module.BROKER.stop()
    if code != 0:
        print("mqrd exited with %s:\n%s" % (code, module.BROKER.log_text()[-4000:]))
        sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)
