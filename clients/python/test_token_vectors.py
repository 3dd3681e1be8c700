"""docs/token-format.md, implemented again in Python from the text alone
(standard library only), checked against the token test vectors.

Everything but the pairing: the text and binary forms, the name rule, the
G1 point checks, the statement bytes, hash-to-G1 and the cluster ID. A
vector refused for a reason this code can see (malformed, old_version,
wrong_cluster, wrong_resource) must be refused for that reason; every
other vector must pass these checks and give the vector's decoded values.
(The pairing itself is checked with a second Go implementation in
verifier/vectors_test.go.) Run it from the repository root or anywhere:

    $ python3 -m unittest -v clients/python/test_token_vectors.py
"""

import base64
import glob
import hashlib
import json
import os
import re
import unicodedata
import unittest

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "verifier", "testdata", "vectors")

P = 65000549695646603732796438742359905742825358107623003571877145026864184071783
MAX_TEXT = 683
MAX_RESOURCE = 256
MAX_HOLDER = 128
DOMAIN_TOKEN = b"palisade/token\x00"
DOMAIN_CLUSTER_ID = b"palisade/cluster-id\x00"
HASH_DOMAIN = b"palisade/bls-bn256/v1\x00"
VERSION = 2


class Refused(Exception):
    def __init__(self, reason, why):
        super().__init__("%s: %s" % (reason, why))
        self.reason = reason


def malformed(why):
    return Refused("malformed", why)


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(b, i):
    n, shift, start = 0, 0, i
    while True:
        if i >= len(b) or shift > 63:
            raise malformed("bad length")
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            break
    if i - start != len(uvarint(n)):
        raise malformed("non-minimal length")
    return n, i


def check_name(what, raw, limit):
    if not 1 <= len(raw) <= limit:
        raise malformed("%s of %d bytes" % (what, len(raw)))
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise malformed("%s is not UTF-8" % what)
    for ch in s:
        if unicodedata.category(ch)[0] not in "LMNPS":
            raise malformed("%s contains U+%04X" % (what, ord(ch)))
    return s


def on_g1(b):
    x, y = int.from_bytes(b[:32], "big"), int.from_bytes(b[32:], "big")
    return x < P and y < P and (x, y) != (0, 0) and (y * y - x * x * x - 3) % P == 0


def decode_text(text):
    """Section 1: the binary form of a token's text."""
    s = text.strip()
    if len(s.encode()) > MAX_TEXT:
        raise malformed("text too long")
    if s.startswith("pt1."):
        raise Refused("old_version", "version 1 text")
    if not s.startswith("pt2."):
        raise malformed("no pt2. prefix")
    rest = s[4:]
    if not re.fullmatch(r"[A-Za-z0-9_-]*", rest) or len(rest) % 4 == 1:
        raise malformed("not unpadded base64url")
    b = base64.urlsafe_b64decode(rest + "=" * (-len(rest) % 4))
    if base64.urlsafe_b64encode(b).decode().rstrip("=") != rest:
        raise malformed("non-zero padding bits")
    return b


def decode_binary(b):
    """Section 2: the fields of a binary token."""
    if not b:
        raise malformed("empty")
    if b[0] == 1:
        raise Refused("old_version", "version byte 1")
    if b[0] != VERSION:
        raise malformed("version %d" % b[0])
    i = 1

    def take(n, what):
        nonlocal i
        if i + n > len(b):
            raise malformed("%s truncated" % what)
        v = b[i : i + n]
        i += n
        return v

    def field(what, limit):
        nonlocal i
        n, i = read_uvarint(b, i)
        if n > limit:
            raise malformed("%s of %d bytes" % (what, n))
        return take(n, what)

    cluster = take(32, "cluster")
    resource = field("resource", MAX_RESOURCE)
    epoch = int.from_bytes(take(8, "epoch"), "big")
    holder = field("holder", MAX_HOLDER)
    session = take(16, "session")
    sig = take(64, "signature")
    if i != len(b):
        raise malformed("trailing bytes")
    resource = check_name("resource", resource, MAX_RESOURCE)
    holder = check_name("holder", holder, MAX_HOLDER)
    if session == bytes(16):
        raise malformed("zero session")
    if not on_g1(sig):
        raise malformed("signature is not a canonical G1 point")
    return {"cluster": cluster, "resource": resource, "epoch": epoch, "holder": holder, "session": session, "signature": sig}


def statement(t):
    """Section 3.1: the signed bytes."""
    r, h = t["resource"].encode(), t["holder"].encode()
    return (
        DOMAIN_TOKEN
        + bytes([VERSION])
        + uvarint(32)
        + t["cluster"]
        + uvarint(len(r))
        + r
        + t["epoch"].to_bytes(8, "big")
        + uvarint(len(h))
        + h
        + t["session"]
    )


def hash_to_g1(m):
    """Section 3.3."""
    x = int.from_bytes(hashlib.sha256(m).digest(), "big") % P
    while True:
        t = (x * x * x + 3) % P
        y = pow(t, (P + 1) // 4, P)
        if y * y % P == t:
            return x.to_bytes(32, "big") + y.to_bytes(32, "big")
        x += 1


def cluster_id(name, key):
    """Section 4."""
    n = name.encode()
    return hashlib.sha256(DOMAIN_CLUSTER_ID + bytes([VERSION]) + uvarint(len(n)) + n + key).digest()


class TokenVectorsTest(unittest.TestCase):
    def test_vectors(self):
        files = sorted(glob.glob(os.path.join(VECTORS, "*.json")))
        self.assertGreater(len(files), 30)
        for f in files:
            with open(f) as fh:
                v = json.load(fh)
            with self.subTest(v["name"]):
                self.check(v)

    def check(self, v):
        v.setdefault("error", "")
        c = v["cluster"]
        key = bytes.fromhex(c["public_key"])
        self.assertEqual(cluster_id(c["name"], key).hex(), c["id"])
        try:
            t = decode_binary(decode_text(v["token"]))
            if t["cluster"].hex() != c["id"]:
                raise Refused("wrong_cluster", "another cluster")
            if t["resource"] != v["resource"]:
                raise Refused("wrong_resource", "another resource")
        except Refused as e:
            self.assertEqual(e.reason, v["error"], str(e))
            self.assertNotIn(v["error"], ("", "invalid_signature", "stale"))
            return
        # Only the pairing or the barrier can refuse it now.
        self.assertIn(v["error"], ("", "invalid_signature", "stale"))
        d = v["decoded"]
        self.assertEqual(t["cluster"].hex(), d["cluster"])
        self.assertEqual(t["resource"], d["resource"])
        self.assertEqual(t["epoch"], d["epoch"])
        self.assertEqual(t["holder"], d["holder"])
        self.assertEqual(t["session"].hex(), d["session"])
        self.assertEqual(t["signature"].hex(), d["signature"])
        signed = statement(t)
        self.assertEqual(signed.hex(), d["signed_bytes"])
        self.assertEqual((HASH_DOMAIN + signed).hex(), d["hash_input"])
        self.assertEqual(hash_to_g1(HASH_DOMAIN + signed).hex(), d["hash_to_g1"])
        if v.get("barrier") is not None:
            admitted = t["epoch"] >= v["barrier"]
            self.assertEqual(admitted, v["valid"])
            if admitted:
                self.assertEqual(max(t["epoch"], v["barrier"]), v["new_barrier"])


if __name__ == "__main__":
    unittest.main()
