#!/usr/bin/python3
"""Writes journal files as mqr/journal.h describes them, for the CLI tests:
make_journal.py OUT FILE_ID N [torn|damaged]: N records (ids 1..N), each its own write (a
BATCH record before it), then the end marker; torn cuts the last record in half; damaged
flips a byte of the first record (later writes follow it: damage in the middle)."""
import struct
import sys

POLY = 0x82F63B78
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (POLY if c & 1 else 0)
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def main(argv):
    out, file_id, n = argv[1], int(argv[2]), int(argv[3])
    mode = argv[4] if len(argv) > 4 else ""
    head = b"MQRJ" + struct.pack("<HHQI", 3, 0, file_id, 0)
    data = bytearray(head + struct.pack("<I", crc32c(head)))
    starts = []
    for i in range(1, n + 1):
        batch = struct.pack("<QBQ", file_id, 7, i)
        data += struct.pack("<II", len(batch), crc32c(batch)) + batch
        body = struct.pack("<QBQ", file_id, 1 + (i % 5), i) + bytes([i % 256]) * (10 * i)
        starts.append(len(data))
        data += struct.pack("<II", len(body), crc32c(body)) + body
    if mode == "torn":
        data = data[: starts[-1] + (len(data) - starts[-1]) // 2]
    else:
        data += bytes(8)
    if mode == "damaged":
        data[starts[0] + 20] ^= 0x40
    open(out, "wb").write(bytes(data))


if __name__ == "__main__":
    main(sys.argv)
