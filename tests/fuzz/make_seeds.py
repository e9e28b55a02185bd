#!/usr/bin/python3
"""Seeds for the libFuzzer targets: schema files for fuzz_schema; for fuzz_binary and
fuzz_json, random datums of every schema the targets load (binary, or Avro JSON), each
behind the byte that picks its schema, in the targets' order (sorted file names, the
schemas directory then the resolution one).

usage: make_seeds.py KIND OUTDIR SOURCE_DIR     KIND: schema | binary | json | frame | router | broker | filter | stomp | mqtt | heads
"""
import base64
import json
import random
import os
import shutil
import sys

import avro.schema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from avro_gen import gen, py_encode, to_json  # noqa: E402

kind, out, src = sys.argv[1:4]
os.makedirs(out, exist_ok=True)


# MQTT's encodings, for the mqtt and heads seeds: a variable byte integer, a string, a
# packet (first byte and body), 5.0 properties.
def vbi(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def s(t):
    t = t.encode()
    return len(t).to_bytes(2, "big") + t


def pk(first, body):
    return bytes([first]) + vbi(len(body)) + body


def props(b):
    return vbi(len(b)) + b


if kind == "filter":
    # Selectors (fuzz_filter.c): Artemis's own cases, each grammar rule, and some wrong.
    seeds = [
        "name = 'James' and rank < 200", "rank between 100 and 150", "name not in ('Gromit', 'Bob')",
        "quote LIKE '''In G_d We Trust'''", "foo LIKE '!_%' ESCAPE '!'", "dummy is not null",
        "not(trueProp) or unknownProp", "-.5E1 < .1E1 AND 0x7B = 0173", "rank / version = 61.5",
        "hyphenated_props:a-b = 1", "(a + 1) * -b % 3 <> 9223372036854775807L", "a = 'x' AND (b OR c)",
        "3+5", "a IN (1)", "'unterminated", "((((a))))", "a LIKE '%' ESCAPE '%'",
    ]
    for i, s in enumerate(seeds):
        with open(os.path.join(out, "filter-%02d" % i), "w") as f:
            f.write(s)
    sys.exit(0)
if kind == "stomp":
    # Client streams (fuzz_stomp.c): a version-and-cut byte, then frames of each command,
    # escapes, content-length bodies with NULs, heart-beats, and some wrong.
    frames = [
        b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:h\nheart-beat:100,100\n\n\0",
        b"STOMP\r\naccept-version:1.2\r\nlogin:a\r\npasscode:p\\q\r\n\r\n\0\n",
        b"SEND\ndestination:/queue/a\ncontent-type:text/plain\nreceipt:1\n\nhello\0",
        b"SEND\ndestination:a\\cb\ncontent-length:5\nk:v\\nw\\\\x\\ry\n\na\0b\0c\0\n\n",
        b"SUBSCRIBE\nid:0\ndestination:/topic/t\nack:client-individual\nselector:color = 'red'\n\n\0",
        b"ACK\nid:5\ntransaction:tx1\n\n\0NACK\nid:6\n\n\0",
        b"BEGIN\ntransaction:tx1\n\n\0COMMIT\ntransaction:tx1\n\n\0ABORT\ntransaction:t2\n\n\0",
        b"UNSUBSCRIBE\nid:0\n\n\0DISCONNECT\nreceipt:77\n\n\0",
        b"SEND\nk:a\\tb\n\n\0", b"SEND\ncontent-length:99999\n\nx\0", b"GET / HTTP/1.1\r\n\r\n",
        b"SEND\nnocolon\n\n\0", b"\n\n\r\n",
    ]
    for i, fr in enumerate(frames):
        for v in range(3):
            with open(os.path.join(out, "stomp-%02d-%d" % (i, v)), "wb") as f:
                f.write(bytes([v | ((i * 13) % 64) << 2]) + fr)
    sys.exit(0)
if kind == "heads":
    # Two clients' streams (fuzz_heads.c): a cut byte, then MQTT sessions and STOMP
    # conversations, each whole, so that the fuzzer starts from the heads' paths.
    m4 = (pk(0x10, s("MQTT") + b"\x04\x2c\x00\x1e" + s("c1") + s("w/t") + s("bye"))
          + pk(0x82, b"\x00\x01" + s("a/+") + b"\x02" + s("$share/g/q") + b"\x01")
          + pk(0x31, s("a/r") + b"kept") + pk(0x34, s("a/b") + b"\x00\x07x") + pk(0x62, b"\x00\x07")
          + pk(0x32, s("q") + b"\x00\x08y") + pk(0xC0, b""))
    m5 = (pk(0x10, s("MQTT") + b"\x05\x02\x00\x1e" + props(b"\x11\x00\x00\x00\x3c\x21\x00\x02") + s("c2"))
          + pk(0x82, b"\x00\x01" + props(b"\x0b\x07") + s("a/#") + b"\x25")
          + pk(0x30, s("a/x") + props(b"\x23\x00\x01\x26" + s("k") + s("v")) + b"p")
          + pk(0x30, s("") + props(b"\x23\x00\x01") + b"again") + pk(0x40, b"\x00\x01") + pk(0x50, b"\x00\x02")
          + pk(0x70, b"\x00\x02") + pk(0xA2, b"\x00\x03" + props(b"") + s("a/#")) + pk(0xE0, b"\x00\x00"))
    st = (b"CONNECT\naccept-version:1.2\nclient-id:s1\nheart-beat:0,0\n\n\0"
          b"SUBSCRIBE\nid:1\ndestination:a.b\nack:client\nsubscription-type:MULTICAST\n\n\0"
          b"SUBSCRIBE\nid:2\ndestination:q\nack:client-individual\nselector:k = 'v'\n\n\0"
          b"SEND\ndestination:a.b\nk:v\nreceipt:r1\n\nhello\0SEND\ndestination:q\nreceipt:\n\nempty id\0"
          b"BEGIN\ntransaction:t\n\n\0SEND\ndestination:q\ntransaction:t\ncontent-length:3\n\na\0b\0"
          b"ACK\nid:1.1\ntransaction:t\n\n\0COMMIT\ntransaction:t\n\n\0NACK\nid:2.1\n\n\0"
          b"SUBSCRIBE\nid:3\ndestination:t\ndurable-subscription-name:d\n\n\0UNSUBSCRIBE\nid:1\n\n\0"
          b"DISCONNECT\nreceipt:bye\n\n\0")
    s10 = b"CONNECT\n\n\0SEND\ndestination:q\n\nold\0SUBSCRIBE\ndestination:q\n\n\0ACK\nmessage-id:1\n\n\0"
    ht = (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nHEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
          b"POST /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
          b"GET /metrics HTTP/1.0\r\nAuthorization: Basic dTpw\r\n\r\n")
    body = b'{"name": "q", "routing-type": "ANYCAST", "options": {"durable": false, "filter": "a > 1"}}'
    api = (b"POST /api/v1/queues HTTP/1.1\r\nX-Requested-With: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
           + b"GET /api/v1/queues?search=q&offset=0&limit=2 HTTP/1.1\r\n\r\nGET /api/v1/queues/q/messages HTTP/1.1\r\n\r\n"
           + b"POST /api/v1/queues/q/move HTTP/1.1\r\nX-Requested-With: x\r\nContent-Length: 11\r\n\r\n{\"to\": \"r\"}"
           + b"DELETE /api/v1/queues/q%2Fx HTTP/1.1\r\nX-Requested-With: x\r\nOrigin: http://e\r\n\r\n"
           + b"GET /api/v1/connections HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\nGET /console.js HTTP/1.1\r\n\r\n"
           + b"GET /api/v1/session HTTP/1.1\r\nCookie: a=b; mqr_session=%s\r\nX-Requested-With: x\r\n\r\n" % (b"0" * 64)
           + b"POST /api/v1/session HTTP/1.1\r\nAuthorization: Basic dTpw\r\n\r\n")
    def wsf(payload, op=2):  # a masked client frame (mask 0: the payload as it is)
        return bytes([0x80 | op, 0x80 | len(payload)]) + b"\0\0\0\0" + payload
    up = (b"GET /mqtt HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
    wm = up + b"Sec-WebSocket-Protocol: mqtt\r\n\r\n" + wsf(m4[:60]) + wsf(b"p", 9) + wsf(m4[60:120]) + wsf(b"\x03\xe8", 8)
    ws_ = up + b"Sec-WebSocket-Protocol: v12.stomp\r\n\r\n" + wsf(st[:100]) + wsf(st[100:120])
    # An AMQP 1.0 client's stream as python3-qpid-proton wrote it (SASL ANONYMOUS, a sender
    # and a selective receiver, accepted, released and modified deliveries, a pre-settled
    # sender), and the same without SASL's header.
    amqp = base64.b64decode(
        "QU1RUAMBAAAAAAAkAgEAAABTQcAXAqMJQU5PTllNT1VToAlhbm9ueW1vdXNBTVFQAAEAAAAAAEkCAAAAAFMQwDwKoSQ3M2Vi"
        "YmU4Zi04YmM3LTRkZTUtOTU2Yy05MzgxZGM2ZTk5OTehCTEyNy4wLjAuMUBgf/9AQEBAQEAAAAAaAgAAAABTEcANBEBDcH//"
        "//9wf////wAAAGMCAAAAAFMSwFYOoSY3M2ViYmU4Zi04YmM3LTRkZTUtOTU2Yy05MzgxZGM2ZTk5OTctcUNCUAJQAABTKMAM"
        "C0BDQENCQEBAQEBAAFMpwAoHoQFxQ0BDQkBAQEBDREBAQAAAAFwCAAAAAFMUwAcEQ0OgATFDAFNwwAgDQUBwAAB1MABTc8AP"
        "DEBAQEBAQEBAQEChAWdDAFN00QAAABUAAAAEoQFrVQGhBWNvbG9yoQNyZWQAU3ehBWhlbGxvAAAANwIAAAAAUxTACARDUgGg"
        "ATJDAFNwRQBTc0UAU3TRAAAACQAAAAKhAWtVAgBTd6AEAGJpbgAAAD4CAAAAAFMUwAgEQ1ICoAEzQwBTcMAEAkBQCQBTc0UA"
        "U3fRAAAAFAAAAAKhAWHQAAAACAAAAAJVAVUCAAAAoQIAAAAAUxLAlA6hJjczZWJiZThmLThiYzctNGRlNS05NTZjLTkzODFk"
        "YzZlOTk5Ny1xUgFBUAJQAABTKMBLC6EBcUNAQ0JAQNEAAAA5AAAAAqMIc2VsZWN0b3IAoyFhcGFjaGUub3JnOnNlbGVjdG9y"
        "LWZpbHRlcjpzdHJpbmehBWsgPiAwQEBAAFMpwAgHQENAQ0JAQEBAQ0RAQEAAAAAiAgAAAABTE8AVCUNwf////1IDcH////9S"
        "AUNSAkBCAAAAJAIAAAAAUxPAFwlSAnB/////UgNwf////1IBUgJSAUBCAAAAFgIAAAAAUxXACQVBQ0BBAFMkRQAAABcCAAAA"
        "AFMVwAoFQVIBQEEAUyZFAAAAIgIAAAAAUxXAFQVBUgJAQQBTJ9AAAAAHAAAAA0JCQAAAABECAAAAAFMWwAQCUgFBAAAAcgIA"
        "AAAAUxLAZQ6hLTczZWJiZThmLThiYzctNGRlNS05NTZjLTkzODFkYzZlOTk5Ny0vdG9waWMvdFIBQlABUAAAUyjADAtAQ0BD"
        "QkBAQEBAQABTKcARB6EIL3RvcGljL3RDQENCQEBAQENEQEBAAAAAJQIAAAAAUxTACgVSAVIDoAExQ0EAU3BFAFNzRQBTd6EB"
        "eAAAAAwCAAAAAFMYRQ=="
    )
    plain = b"AMQP\x00\x01\x00\x00" + amqp[amqp.index(b"AMQP\x00\x01\x00\x00") + 8:]
    pairs = [(m4, m5), (m5, st), (st, s10), (m4, st), (m5, m5), (st, st), (ht, m4), (st, ht), (wm, ws_), (ws_, ht), (api, st), (m4, api),
             (amqp, st), (plain, amqp), (m5, plain)]
    for i, (a, b) in enumerate(pairs):
        total = 1 + len(a) + len(b)
        cut = min(255, -(-256 * len(a) // (total - 1)))
        with open(os.path.join(out, "heads-%02d" % i), "wb") as f:
            f.write(bytes([cut]) + a + b)
    sys.exit(0)
if kind == "mqtt":
    # Client streams (fuzz_mqtt.c): a level byte (0: none yet, 1: 3.1.1, 2: 5.0), then
    # packets: CONNECT of each level, PUBLISH of each QoS, acks, SUBSCRIBE, UNSUBSCRIBE,
    # PINGREQ, DISCONNECT, AUTH, with 5.0 properties.
    c4 = pk(0x10, s("MQTT") + b"\x04\xee\x00\x1e" + s("cid") + s("w/t") + s("bye") + s("u") + s("p"))
    c5 = pk(0x10, s("MQTT") + b"\x05\x06\x00\x1e" + props(b"\x11\x00\x00\x0e\x10\x21\x00\x14\x26" + s("k") + s("v"))
            + s("") + props(b"\x18\x00\x00\x00\x05") + s("w") + s("x"))
    tail4 = (pk(0x30, s("a/b") + b"hi") + pk(0x32, s("a") + b"\x00\x01x") + pk(0x34, s("a") + b"\x00\x02y")
             + pk(0x40, b"\x00\x01") + pk(0x50, b"\x00\x02") + pk(0x62, b"\x00\x02") + pk(0x70, b"\x00\x02")
             + pk(0x82, b"\x00\x03" + s("a/+/c") + b"\x01" + s("$share/g/#") + b"\x02")
             + pk(0xA2, b"\x00\x04" + s("a/+/c")) + pk(0xC0, b"") + pk(0xE0, b""))
    tail5 = (pk(0x30, s("") + props(b"\x23\x00\x01\x01\x01\x26" + s("a") + s("b")) + b"p")
             + pk(0x40, b"\x00\x01\x10" + props(b"\x1f" + s("ok")))
             + pk(0x82, b"\x00\x03" + props(b"\x0b\x05") + s("t/#") + b"\x2d")
             + pk(0xF0, b"\x18" + props(b"\x15" + s("SCRAM"))) + pk(0xE0, b"\x04" + props(b"\x11\x00\x00\x00\x00")))
    seeds = [b"\x00" + c4 + tail4, b"\x00" + c5 + tail5, b"\x01" + tail4, b"\x02" + tail5,
             b"\x00" + pk(0x10, s("MQIsdp") + b"\x03\x02\x00\x00" + s("c")), b"\x01\x30\xff\xff\xff\xff\x01"]
    for i, sd in enumerate(seeds):
        with open(os.path.join(out, "mqtt-%02d" % i), "wb") as f:
            f.write(sd)
    sys.exit(0)
if kind == "broker":
    # Scripts of 3-byte steps (fuzz_broker.c): subscribe, send, ack, credit, then random.
    rnd = random.Random(11)
    with open(os.path.join(out, "broker-basic"), "wb") as f:
        f.write(bytes([2, 0, 7, 0, 0, 0x10, 0, 0, 0x10, 3, 0, 0, 4, 0, 5, 0, 7, 0, 5, 0, 0]))
    for k in range(16):
        with open(os.path.join(out, "broker-%02d" % k), "wb") as f:
            f.write(bytes(rnd.randrange(256) & (0xFF if k >= 8 else 0x7F) for _ in range(3 * 80)))
    # Inputs that once failed, run first every time. 01: a delivery's callback closed two
    # consumers of an auto-deleted queue; the second's close took the queue while the
    # first's was still looking at it.
    regress = ["SVh9cDF6LWtJMywqRXx5JRdSMgFBLWRyb3AuYS5KfVNAVSRFfHklJEV8eSUXUjIBQS1kcm9wAAAAAAAAAAAA"
               "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAALmEu"
               "ajYFS0EcbDBhWTo+aF9vVkR1QBUQZ2QRFxtmQDgoHgxwKWRDLzRIMENbXGJNEm0uM3QQUEV3KVMHTSJ9CQUpYC8d"
               "YTZBaCoWNFEBGHc0KkV9dFUqKC44CG0/Z0V6IAc="]
    for k, r in enumerate(regress, 1):
        with open(os.path.join(out, "broker-regress-%02d" % k), "wb") as f:
            f.write(base64.b64decode(r))
    sys.exit(0)
if kind == "router":
    # Scripts of 3-byte steps (fuzz_router.c): each operation on its own, then random
    # scripts, some with failing allocations.
    rnd = random.Random(7)
    for op in range(8):
        with open(os.path.join(out, "router-op-%d" % op), "wb") as f:
            f.write(bytes([0, 5, 0x10, 2 | 8, 5, 1, op, 5, 0x21, op | 8, 5, 0x13]))
    for k in range(16):
        with open(os.path.join(out, "router-%02d" % k), "wb") as f:
            f.write(bytes(rnd.randrange(256) & (0xFF if k >= 8 else 0x7F) for _ in range(3 * 60)))
    sys.exit(0)
if kind == "frame":
    # Frame bodies: each frame type's record, random, behind its branch index.
    schema = avro.schema.parse(open(os.path.join(src, "conf/schemas/protocol/frame.avsc")).read())
    for i, branch in enumerate(schema.schemas):
        for k in range(4):
            with open(os.path.join(out, "frame-%02d-%d" % (i, k)), "wb") as f:
                f.write(bytes([i * 2]) + py_encode(branch, gen(branch, 0)))
    sys.exit(0)
paths = []
for d in ("schemas", "resolution"):
    base = os.path.join(src, "tests/data/avro", d)
    paths += [os.path.join(base, f) for f in sorted(os.listdir(base)) if f.endswith(".avsc")]
if kind == "binary":
    # The flat records bound to a C struct (fuzz_binary.c): zero values, then small ones.
    for k in range(2):
        for j, body in enumerate([bytes(8) + bytes(4) + bytes(8), bytes([2, 4]) + b"ab" * 40]):
            with open(os.path.join(out, "flat-%d-%d" % (k, j)), "wb") as f:
                f.write(bytes([0x80 | k]) + body + bytes(40))
for i, path in enumerate(paths):
    if kind == "schema":
        shutil.copy(path, os.path.join(out, "%02d.avsc" % i))
        continue
    schema = avro.schema.parse(open(path).read())
    for k in range(4):
        v = gen(schema, 0)
        if kind == "binary":
            data = py_encode(schema, v)
        else:
            data = json.dumps(to_json(schema, v)).encode()
        with open(os.path.join(out, "%02d-%d" % (i, k)), "wb") as f:
            f.write(bytes([i]) + data)
