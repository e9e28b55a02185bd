#!/usr/bin/python3
"""Interop with Python avro (Debian python3-avro), byte for byte, both directions.

For each schema in tests/data/avro/schemas, many random datums (edges included) are
written by Python avro's DatumWriter; the same datums in Avro's JSON encoding go through
`mqr avro encode`, which must give the same bytes; Python's bytes go through
`mqr avro decode`, whose JSON, read back and written again by Python, must give the same
bytes. With the peer's Avro C round trip (AVROC), those bytes are also read and written
again by Apache Avro C and must come back unchanged.

usage: test_interop_python.py MQR SOURCE_DIR [AVROC_ROUNDTRIP]
"""
import io
import json
import os
import struct
import subprocess
import sys
import tempfile

import avro.datafile
import avro.io
import avro.schema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from avro_gen import from_json, gen, py_encode, rng, to_json  # noqa: E402

MQR, SRC = sys.argv[1], sys.argv[2]
AVROC = sys.argv[3] if len(sys.argv) > 3 else None
DATUMS = 200


def run(args, data):
    p = subprocess.run(args, input=data, capture_output=True)
    if p.returncode != 0:
        raise AssertionError("%s failed: %s" % (" ".join(args), p.stderr.decode(errors="replace")))
    return p.stdout


passed = failed = 0
sdir = os.path.join(SRC, "tests/data/avro/schemas")
for name in sorted(os.listdir(sdir)):
    path = os.path.join(sdir, name)
    schema = avro.schema.parse(open(path).read())
    datums = [gen(schema, 0) for _ in range(DATUMS)]
    py_bytes = [py_encode(schema, d) for d in datums]
    json_lines = "".join(json.dumps(to_json(schema, d), ensure_ascii=rng.random() < 0.5) + "\n" for d in datums)
    try:
        # JSON -> mqr binary == Python's binary, datum by datum (all at once, then split).
        ours = run([MQR, "avro", "encode", "--schema", path], json_lines.encode())
        want = b"".join(py_bytes)
        if ours != want:
            pos = 0
            for i, b in enumerate(py_bytes):
                if ours[pos:pos + len(b)] != b:
                    raise AssertionError("datum %d: mqr wrote %s, Python %s; json %s" % (
                        i, ours[pos:pos + len(b)].hex(), b.hex(), json.dumps(to_json(schema, datums[i]))))
                pos += len(b)
            raise AssertionError("lengths differ")
        # Python's binary -> mqr JSON -> Python's binary again.
        out = run([MQR, "avro", "decode", "--schema", path], want).decode().splitlines()
        assert len(out) == len(datums), "%d JSON lines for %d datums" % (len(out), len(datums))
        for i, line in enumerate(out):
            again = py_encode(schema, from_json(schema, json.loads(line)))
            assert again == py_bytes[i], "datum %d: mqr decoded %s" % (i, line)
        # Single-object encoding agrees too.
        so = run([MQR, "avro", "encode", "--single-object", "--schema", path], json_lines.encode())
        back = run([MQR, "avro", "decode", "--single-object", "--schema", path], so)
        assert back.decode().splitlines() == out
        # Container files, both codecs, both ways: Python writes, `mqr avro cat` reads;
        # `mqr avro write` writes, Python reads.
        with tempfile.TemporaryDirectory() as tmp:
            for codec in ("null", "deflate"):
                f = os.path.join(tmp, "py-%s.avro" % codec)
                with open(f, "wb") as fh:
                    w = avro.datafile.DataFileWriter(fh, avro.io.DatumWriter(), schema, codec=codec)
                    for d in datums:
                        w.append(d)
                    w.close()
                cat = run([MQR, "avro", "cat", f], b"").decode().splitlines()
                assert cat == out, "mqr avro cat of Python's %s container differs" % codec
                g = os.path.join(tmp, "mqr-%s.avro" % codec)
                run([MQR, "avro", "write", "--schema", path, "--codec", codec, g], json_lines.encode())
                with open(g, "rb") as fh:
                    r = avro.datafile.DataFileReader(fh, avro.io.DatumReader())
                    assert r.codec == codec
                    got = [py_encode(schema, d) for d in r]
                    r.close()
                assert got == py_bytes, "Python read mqr's %s container differently" % codec
        if AVROC:
            framed = b"".join(struct.pack("<I", len(b)) + b for b in py_bytes)
            rt = run([AVROC, path], framed)
            assert rt == want, "Avro C read and wrote back different bytes"
        print("ok   %s: %d datums, %d bytes, identical%s; containers null+deflate both ways" % (
            name, len(datums), len(want), " (Python, mqr, Avro C)" if AVROC else ""))
        passed += 1
    except AssertionError as e:
        print("FAIL %s: %s" % (name, e))
        failed += 1
# Schema resolution: Python writes with the writer schema and reads with (writer, reader);
# `mqr avro decode --reader-schema` must read the same values (compared as the reader's
# bytes, which Python writes from each side's result).
rdir = os.path.join(SRC, "tests/data/avro/resolution")
for name in sorted(f[:-len(".writer.avsc")] for f in os.listdir(rdir) if f.endswith(".writer.avsc")):
    wpath = os.path.join(rdir, name + ".writer.avsc")
    rpath = os.path.join(rdir, name + ".reader.avsc")
    ws = avro.schema.parse(open(wpath).read())
    rs = avro.schema.parse(open(rpath).read())
    try:
        datums = [gen(ws, 0) for _ in range(DATUMS)]
        wbytes = [py_encode(ws, d) for d in datums]
        reader = avro.io.DatumReader(ws, rs)
        want = [py_encode(rs, reader.read(avro.io.BinaryDecoder(io.BytesIO(b)))) for b in wbytes]
        out = run([MQR, "avro", "decode", "--schema", wpath, "--reader-schema", rpath], b"".join(wbytes))
        lines = out.decode().splitlines()
        assert len(lines) == len(datums), "%d JSON lines for %d datums" % (len(lines), len(datums))
        for i, line in enumerate(lines):
            got = py_encode(rs, from_json(rs, json.loads(line)))
            assert got == want[i], "datum %d: mqr read %s" % (i, line)
        # The same through single-object encoding, the writer found by its fingerprint.
        header = b"\xc3\x01" + struct.pack("<Q", int(run([MQR, "schema", "fingerprint", wpath], b"").decode(), 16))
        so = run([MQR, "avro", "decode", "--single-object", "--schema", rpath, "--schema", wpath,
                  "--reader-schema", rpath], b"".join(header + b for b in wbytes))
        assert so == out, "single-object resolution differs"
        print("ok   resolution %s: %d datums read as the reader schema, as Python reads them" % (name, len(datums)))
        passed += 1
    except AssertionError as e:
        print("FAIL resolution %s: %s" % (name, e))
        failed += 1
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
