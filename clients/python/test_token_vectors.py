"""docs/token-format.md, implemented again in Python from the text alone
(standard library only), checked against the token test vectors.

The text and binary forms, the name rule, the byte-level rules of the
signature's encoding, the statement (signed bytes) and the cluster ID are
written here from the format's page. The signature itself is checked with
bls12381_minsig, the min-sig verifier next to this file, written from the
specifications (IETF BLS signatures, RFC 9380, the pairing-friendly curves
draft): strict point decoding, hash_to_G1 and the pairing equation. No
code is shared with the Go implementation.

Every vector must be admitted or refused exactly as it says, for the reason
it gives; every vector whose token decodes must give the vector's decoded
values, and its signature must verify under the cluster's key exactly when
the vector is refused for no reason of the signature.

verify_json() checks a token from what `palisade verify --json` prints
(cmd/palisade/internal/cli's TestVerifyJSONOutsideCheck feeds it real output):

    $ palisade verify --json --cluster cluster.json "$TOKEN" |
        python3 -c 'import json, sys, test_token_vectors as t; t.verify_json(json.load(sys.stdin)); print("verified")'

(run from clients/python). Run the tests from the repository root or
anywhere:

    $ python3 -m unittest -v clients/python/test_token_vectors.py

cmd/palisade's TestPythonTokenVectors runs this file and expects exactly
one test (the vectors are subtests of it).
"""

import base64
import functools
import glob
import hashlib
import json
import os
import re
import sys
import unicodedata
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bls12381_minsig  # noqa: E402  (the verifier next to this file)

VECTORS = os.path.join(HERE, "..", "..", "verifier", "testdata", "vectors")

CIPHERSUITE = "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
VERSION = 3
PREFIX = "pt3."
OLD_PREFIXES = {"pt1.": 1, "pt2.": 2}
SIG_BYTES = 48
KEY_BYTES = 96
MAX_RESOURCE = 256
MAX_HOLDER = 128
MAX_BINARY = 1 + 32 + 2 + MAX_RESOURCE + 8 + 2 + MAX_HOLDER + 16 + SIG_BYTES
MAX_TEXT = len(PREFIX) + (MAX_BINARY * 4 + 2) // 3
DOMAIN_TOKEN = b"palisade/token\x00"
DOMAIN_CLUSTER_ID = b"palisade/cluster-id\x00"

assert CIPHERSUITE.encode() == bls12381_minsig.DST
assert (MAX_BINARY, MAX_TEXT) == (493, 662)


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


def check_signature_bytes(sig):
    """Section 2: the byte-level rules of the signature's encoding, which a
    token parser applies without decompressing the point."""
    if len(sig) != SIG_BYTES:
        raise malformed("signature of %d bytes" % len(sig))
    if not sig[0] & 0x80:
        raise malformed("signature without the compression flag")
    if sig[0] & 0x40:
        raise malformed("signature with the infinity flag (the identity, or a bad encoding)")
    if int.from_bytes(bytes([sig[0] & 0x1F]) + sig[1:], "big") >= bls12381_minsig.P:
        raise malformed("signature x not below p")


def decode_text(text):
    """Section 1: the binary form of a token's text."""
    s = text.strip()
    if len(s.encode()) > MAX_TEXT:
        raise malformed("text too long")
    for prefix, version in OLD_PREFIXES.items():
        if s.startswith(prefix):
            raise Refused("old_version", "version %d text" % version)
    if not s.startswith(PREFIX):
        raise malformed("no %s prefix" % PREFIX)
    rest = s[len(PREFIX):]
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
    if b[0] in (1, 2):
        raise Refused("old_version", "version byte %d" % b[0])
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
    sig = take(SIG_BYTES, "signature")
    if i != len(b):
        raise malformed("trailing bytes")
    resource = check_name("resource", resource, MAX_RESOURCE)
    holder = check_name("holder", holder, MAX_HOLDER)
    if session == bytes(16):
        raise malformed("zero session")
    check_signature_bytes(sig)
    return {"cluster": cluster, "resource": resource, "epoch": epoch, "holder": holder, "session": session, "signature": sig}


def statement(t):
    """Section 3.1: the signed bytes, the message exactly as signed."""
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


def cluster_id(name, key):
    """Section 4."""
    n = name.encode()
    return hashlib.sha256(DOMAIN_CLUSTER_ID + bytes([VERSION]) + uvarint(len(n)) + n + key).digest()


@functools.lru_cache(maxsize=None)
def signature_error(key, msg, sig):
    """Section 3: None if sig is a valid signature of msg under key, else
    why not. Each (key, msg, sig) costs one pairing check, done once."""
    try:
        bls12381_minsig.check_signature(key, msg, sig)
    except ValueError as e:
        return "%s: %s" % (type(e).__name__, e)
    return None


def verify_json(out):
    """Check a token from the JSON object `palisade verify --json` prints:
    the ciphersuite and DST are the min-sig ones, "message" is the
    statement of the printed fields (section 3.1), and "signature" is a
    valid signature of "message" under "group_key". Returns the message;
    raises ValueError (bls12381_minsig's errors are ValueErrors) if any of
    it fails."""
    if out.get("ciphersuite") != CIPHERSUITE or out.get("dst", "").encode() != bls12381_minsig.DST:
        raise ValueError("ciphersuite %r, dst %r: not %s" % (out.get("ciphersuite"), out.get("dst"), CIPHERSUITE))
    key = bytes.fromhex(out["group_key"])
    msg = bytes.fromhex(out["message"])
    sig = bytes.fromhex(out["signature"])
    if len(key) != KEY_BYTES or len(sig) != SIG_BYTES:
        raise ValueError("group key of %d bytes, signature of %d" % (len(key), len(sig)))
    fields = {
        "cluster": bytes.fromhex(out["cluster"]),
        "resource": out["resource"],
        "epoch": int(out["epoch"]),
        "holder": out["holder"],
        "session": bytes.fromhex(out["session"]),
    }
    if statement(fields) != msg:
        raise ValueError("message is not the statement of the printed fields")
    bls12381_minsig.check_signature(key, msg, sig, out["dst"].encode())
    return msg


def encode_affine_g1(pt):
    """x then y, 48 bytes each, big-endian (the vectors' hash_to_g1)."""
    x, y = pt
    return x.v.to_bytes(48, "big") + y.v.to_bytes(48, "big")


class TokenVectorsTest(unittest.TestCase):
    def test_vectors(self):
        files = sorted(glob.glob(os.path.join(VECTORS, "*.json")))
        self.assertGreater(len(files), 40)
        reasons = set()
        for f in files:
            with open(f) as fh:
                v = json.load(fh)
            with self.subTest(v["name"]):
                reasons.add(self.check(v))
        self.assertEqual(reasons, {"", "malformed", "old_version", "wrong_cluster", "wrong_resource", "invalid_signature", "stale"})

    def check(self, v):
        """Section 5's steps on one vector; returns the reason found."""
        v.setdefault("error", "")
        c = v["cluster"]
        self.assertEqual(c["ciphersuite"], CIPHERSUITE)
        key = bytes.fromhex(c["public_key"])
        self.assertEqual(len(key), KEY_BYTES)
        self.assertEqual(cluster_id(c["name"], key).hex(), c["id"])
        t = None
        try:
            t = decode_binary(decode_text(v["token"]))
            if t["cluster"].hex() != c["id"]:
                raise Refused("wrong_cluster", "another cluster")
            if t["resource"] != v["resource"]:
                raise Refused("wrong_resource", "another resource")
            why = signature_error(key, statement(t), t["signature"])
            if why is not None:
                raise Refused("invalid_signature", why)
            if v.get("barrier") is not None and t["epoch"] < v["barrier"]:
                raise Refused("stale", "epoch %d below barrier %d" % (t["epoch"], v["barrier"]))
            reason = ""
        except Refused as e:
            reason = e.reason
        self.assertEqual(reason, v["error"])
        self.assertEqual(reason == "", v["valid"])
        if v.get("new_barrier") is not None:
            self.assertEqual(max(t["epoch"], v["barrier"]), v["new_barrier"])

        d = v.get("decoded")
        self.assertEqual(t is not None, d is not None, "decoded values exactly for the tokens that decode")
        if t is None:
            return reason
        self.assertEqual(t["cluster"].hex(), d["cluster"])
        self.assertEqual(t["resource"], d["resource"])
        self.assertEqual(t["epoch"], d["epoch"])
        self.assertEqual(t["holder"], d["holder"])
        self.assertEqual(t["session"].hex(), d["session"])
        self.assertEqual(t["signature"].hex(), d["signature"])
        signed = statement(t)
        self.assertEqual(signed.hex(), d["signed_bytes"])
        self.assertEqual(encode_affine_g1(bls12381_minsig.hash_to_g1(signed)).hex(), d["hash_to_g1"])
        # The pairing agrees with the vector under the cluster's key, also
        # where another check refused the token first.
        verifies = signature_error(key, signed, t["signature"]) is None
        self.assertEqual(verifies, v["error"] in ("", "stale", "wrong_resource"))
        if verifies:
            # What `palisade verify --json` would print for this token.
            out = {
                "cluster": d["cluster"], "resource": d["resource"], "epoch": d["epoch"],
                "holder": d["holder"], "session": d["session"], "signature": d["signature"],
                "ciphersuite": CIPHERSUITE, "dst": CIPHERSUITE, "message": d["signed_bytes"],
                "group_key": c["public_key"],
            }
            self.assertEqual(verify_json(out), signed)
            for field, value in (("epoch", d["epoch"] + 1), ("message", d["signed_bytes"][:-2] + "ff"), ("dst", "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_POP_")):
                with self.assertRaises(ValueError, msg=field):
                    verify_json(dict(out, **{field: value}))
        return reason


if __name__ == "__main__":
    unittest.main()
