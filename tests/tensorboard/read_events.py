#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, for the tests: it shares no code with ragtrain's C++ writer.

TensorBoard's own Python package is not installable on the test machine, so this reader implements the format
from its specification: TFRecord framing (uint64 length, masked CRC-32C of the length, payload, masked CRC-32C of
the payload; CRC-32C = Castagnoli, reflected polynomial 0x82F63B78, mask = rotr15 + 0xa282ead8) around
tensorflow.Event protocol buffers (event.proto: wall_time = 1 double, step = 2 int64, file_version = 3,
summary = 5, session_log = 7; summary.proto: Summary.value = 1, Value.tag = 1, Value.simple_value = 2 float;
SessionLog.status = 1, START = 1). It checks every CRC, decodes the protobuf wire format field by field
(varints included) and refuses anything malformed.

usage: read_events.py RUN_DIR_OR_FILE...   prints one JSON document on stdout:
  {"files": [...], "file_versions": [...], "session_starts": [steps], "events": N,
   "scalars": {tag: [[step, value, wall_time], ...]}}   (after TensorBoard's purge rule: a SessionLog START at
  step s drops the points at steps >= s read before it, as a restarted job redoes them)
Exit status 1 with a message on stderr for a damaged file.
"""
import glob
import json
import os
import struct
import sys

PREFIX = "events.out.tfevents."


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def self_test():
    # RFC 3720 (iSCSI) appendix B.4 test vectors for CRC-32C, and the usual check value.
    assert crc32c(bytes(32)) == 0x8A9136AA, "crc32c of 32 zero bytes"
    assert crc32c(bytes([0xFF] * 32)) == 0x62A8AB43, "crc32c of 32 0xFF bytes"
    assert crc32c(bytes(range(32))) == 0x46DD794E, "crc32c of 0..31"
    assert crc32c(b"123456789") == 0xE3069283, "crc32c check value"
    assert varint(bytes([0xAC, 0x02]), 0) == (300, 2), "varint 300"


def varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift >= 64:
            raise ValueError("varint longer than 10 bytes")


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message; value is int, or bytes for wire type 2."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            if i + 8 > len(buf):
                raise ValueError("truncated fixed64")
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated length-delimited field")
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            if i + 4 > len(buf):
                raise ValueError("truncated fixed32")
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        yield field, wire, value


def records(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError("%s: truncated record header at byte %d" % (path, i))
        head = data[i:i + 8]
        (length,) = struct.unpack("<Q", head)
        (crc_len,) = struct.unpack("<I", data[i + 8:i + 12])
        if crc_len != masked(head):
            raise ValueError("%s: bad length CRC at byte %d" % (path, i))
        start = i + 12
        if start + length + 4 > len(data):
            raise ValueError("%s: truncated record at byte %d" % (path, i))
        payload = data[start:start + length]
        (crc_data,) = struct.unpack("<I", data[start + length:start + length + 4])
        if crc_data != masked(payload):
            raise ValueError("%s: bad data CRC at byte %d" % (path, i))
        yield payload
        i = start + length + 4


def decode_event(payload):
    ev = {"wall_time": None, "step": 0}
    for field, wire, value in fields(payload):
        if field == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", value)[0]
        elif field == 2 and wire == 0:
            ev["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif field == 3 and wire == 2:
            ev["file_version"] = value.decode("utf-8")
        elif field == 5 and wire == 2:
            ev["summary"] = []
            for f, w, v in fields(value):
                if f != 1 or w != 2:
                    raise ValueError("Summary holds field %d" % f)
                tag, simple = None, None
                for vf, vw, vv in fields(v):
                    if vf == 1 and vw == 2:
                        tag = vv.decode("utf-8")
                    elif vf == 2 and vw == 5:
                        simple = struct.unpack("<f", vv)[0]
                if tag is None or simple is None:
                    raise ValueError("Summary.Value without tag or simple_value")
                ev["summary"].append((tag, simple))
        elif field == 7 and wire == 2:
            status = 0
            for f, w, v in fields(value):
                if f == 1 and w == 0:
                    status = v
            ev["session_status"] = status
        else:
            raise ValueError("unexpected Event field %d (wire type %d)" % (field, wire))
    if ev["wall_time"] is None:
        raise ValueError("Event without wall_time")
    return ev


def read(paths):
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, PREFIX + "*"))) if os.path.isdir(p) else [p]
    out = {"files": files, "file_versions": [], "session_starts": [], "events": 0, "scalars": {}}
    for path in files:   # TensorBoard loads a folder's event files in name order
        first = True
        for payload in records(path):
            ev = decode_event(payload)
            out["events"] += 1
            if first and "file_version" not in ev:
                raise ValueError("%s: the first event is not the file version" % path)
            first = False
            if "file_version" in ev:
                out["file_versions"].append(ev["file_version"])
            if ev.get("session_status") == 1:   # START: a restarted job redoes the steps from here
                out["session_starts"].append(ev["step"])
                for tag in out["scalars"]:
                    out["scalars"][tag] = [x for x in out["scalars"][tag] if x[0] < ev["step"]]
            for tag, value in ev.get("summary", []):
                out["scalars"].setdefault(tag, []).append([ev["step"], value, ev["wall_time"]])
    return out


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    self_test()
    try:
        result = read(sys.argv[1:])
    except ValueError as e:
        sys.stderr.write("read_events.py: %s\n" % e)
        return 1
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
