"""Random Avro datums for a parsed schema (python3-avro), with edges mixed in, and
conversion to and from Avro's JSON encoding; shared by the interop test and the fuzzing
seed generator. Python avro 1.11 writes a union's LAST validating branch and takes True
for a double, which to_json follows."""
import io
import random
import struct

import avro.io
import avro.schema

rng = random.Random(20261202)

INTS = [0, -1, 1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1, -2**31]
LONGS = INTS + [2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**53 + 1]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e-45, 3.4028234663852886e38, float("nan"), float("inf"), float("-inf")]
DOUBLES = FLOATS + [5e-324, 1.7976931348623157e308, 0.1]
STRINGS = ["", "a", "h\u00e9llo", "\U0001F600", "\u4e2d\u6587", "quote\"back\\slash\nnl\ttab\x01", "x" * 300]


def named(s):
    return isinstance(s, avro.schema.NamedSchema)


def gen(s, depth):
    t = s.type
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "int":
        return rng.choice(INTS) if rng.random() < 0.5 else rng.randint(-2**31, 2**31 - 1)
    if t == "long":
        return rng.choice(LONGS) if rng.random() < 0.5 else rng.randint(-2**63, 2**63 - 1)
    if t == "float":
        v = rng.choice(FLOATS) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if t == "double":
        return rng.choice(DOUBLES) if rng.random() < 0.5 else rng.uniform(-1e300, 1e300)
    if t == "string":
        return rng.choice(STRINGS) if rng.random() < 0.6 else "".join(
            chr(rng.choice([rng.randint(32, 126), rng.randint(160, 0xD7FF), rng.randint(0x10000, 0x10FFFF)]))
            for _ in range(rng.randint(0, 12)))
    if t == "bytes":
        return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 20)))
    if t == "fixed":
        return bytes(rng.randint(0, 255) for _ in range(s.size))
    if t == "enum":
        return rng.choice(s.symbols)
    if t == "array":
        n = 0 if depth > 3 else rng.randint(0, 5)
        return [gen(s.items, depth + 1) for _ in range(n)]
    if t == "map":
        n = 0 if depth > 3 else rng.randint(0, 4)
        return {rng.choice(STRINGS[:5]) + str(k): gen(s.values, depth + 1) for k in range(n)}
    if t in ("record", "error"):
        return {f.name: gen(f.type, depth + 1) for f in s.fields}
    if t == "union":
        branches = s.schemas
        if depth > 3:  # end recursion: the null branch, or a non-record one
            simple = [b for b in branches if b.type in ("null", "int", "long", "string", "boolean")]
            if simple:
                return gen(simple[0], depth + 1)
        return gen(rng.choice(branches), depth + 1)
    raise ValueError(t)


def branch_of(s, v):
    """The branch Python's writer picks: the last that validates (avro 1.11's loop)."""
    found = None
    for i, b in enumerate(s.schemas):
        if avro.io.validate(b, v):
            found = (i, b)
    if found is None:
        raise ValueError("no branch for %r" % (v,))
    return found


def branch_name(b):
    return b.fullname if named(b) else b.type


def to_json(s, v):
    t = s.type
    if t in ("bytes", "fixed"):
        return v.decode("latin-1")
    if t in ("float", "double"):
        return float(v)  # Python's validate takes True for a double, and writes 1.0
    if t == "array":
        return [to_json(s.items, x) for x in v]
    if t == "map":
        return {k: to_json(s.values, x) for k, x in v.items()}
    if t in ("record", "error"):
        return {f.name: to_json(f.type, v[f.name]) for f in s.fields}
    if t == "union":
        _, b = branch_of(s, v)
        return None if b.type == "null" else {branch_name(b): to_json(b, v)}
    return v


def from_json(s, j):
    t = s.type
    if t in ("bytes", "fixed"):
        return j.encode("latin-1")
    if t in ("float", "double"):
        return float(j)
    if t == "array":
        return [from_json(s.items, x) for x in j]
    if t == "map":
        return {k: from_json(s.values, x) for k, x in j.items()}
    if t in ("record", "error"):
        return {f.name: from_json(f.type, j[f.name]) for f in s.fields}
    if t == "union":
        if j is None:
            return None
        (name, inner), = j.items()
        for b in s.schemas:
            if branch_name(b) == name:
                return from_json(b, inner)
        raise ValueError(name)
    return j


def py_encode(s, v):
    buf = io.BytesIO()
    avro.io.DatumWriter(s).write(v, avro.io.BinaryEncoder(buf))
    return buf.getvalue()
