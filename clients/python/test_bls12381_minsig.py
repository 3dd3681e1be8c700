"""Tests of bls12381_minsig.py, the BLS12-381 min-sig verifier written in
Python from the specifications alone, against:

  - RFC 9380 Appendix J.9.1 (BLS12381G1_XMD:SHA-256_SSWU_RO_), read from the
    copy the Go package tests with:
    crypto/bls12381/testdata/rfc9380_J.9.1_BLS12381G1_XMD-SHA-256_SSWU_RO_.txt;
  - draft-irtf-cfrg-pairing-friendly-curves: the compressed encodings of the
    generators and the optimal ate pairing test vector e(BP, BP');
  - crypto/bls12381/testdata/minsig_vectors.json: signatures made by the Go
    package and malformed or wrong inputs, each with the outcome (and the
    reason for a refusal) the Go verifiers reach.

Standard library only. Run from clients/python (go test's TestPythonMinSig
in crypto/bls12381 does):

    $ python3 -m unittest -v test_bls12381_minsig.py
"""

import json
import os
import unittest

import bls12381_minsig as bls

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "..", "crypto", "bls12381", "testdata")
RFC9380_VECTORS = os.path.join(TESTDATA, "rfc9380_J.9.1_BLS12381G1_XMD-SHA-256_SSWU_RO_.txt")
MINSIG_VECTORS = os.path.join(TESTDATA, "minsig_vectors.json")

REASONS = {
    "encoding": bls.EncodingError,
    "identity": bls.IdentityError,
    "not_in_subgroup": bls.SubgroupError,
    "invalid_signature": bls.InvalidSignatureError,
}


def read_rfc9380_vectors():
    """Parse the vector file: "key = value" lines, "#" comments, one vector
    per "msg =" line (the message is ASCII, other values big-endian hex)."""
    header, vectors = {}, []
    with open(RFC9380_VECTORS, encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError("bad line %r" % line)
            key, value = key.strip(), value.strip()
            if key == "msg":
                vectors.append({"msg": value})
            elif vectors:
                vectors[-1][key] = int(value, 16)
            else:
                header[key] = value
    return header, vectors


class HashToG1RFC9380(unittest.TestCase):
    """RFC 9380 Appendix J.9.1, every intermediate value the file gives."""

    def test_vectors(self):
        header, vectors = read_rfc9380_vectors()
        self.assertEqual(header.get("suite"), "BLS12381G1_XMD:SHA-256_SSWU_RO_")
        dst = header.get("dst", "").encode()
        self.assertEqual(dst, b"QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_")
        self.assertEqual(len(vectors), 5)
        self.assertEqual([v["msg"][:5] for v in vectors], ["", "abc", "abcde", "q128_", "a512_"])
        for v in vectors:
            with self.subTest(msg=v["msg"][:16]):
                msg = v["msg"].encode("ascii")
                u0, u1 = bls.hash_to_field(msg, 2, dst)
                self.assertEqual((u0.v, u1.v), (v["u[0]"], v["u[1]"]))
                q0, q1 = bls.map_to_curve(u0), bls.map_to_curve(u1)
                self.assertEqual((q0[0].v, q0[1].v), (v["Q0.x"], v["Q0.y"]))
                self.assertEqual((q1[0].v, q1[1].v), (v["Q1.x"], v["Q1.y"]))
                x, y = bls.hash_to_g1(msg, dst)
                self.assertEqual(x.v, v["P.x"])
                self.assertEqual(y.v, v["P.y"])

    def test_signature_dst(self):
        self.assertEqual(bls.DST, b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_")
        h = bls.hash_to_g1(b"abc")
        self.assertTrue(bls.is_on_curve(h, bls.B1))
        self.assertIsNone(bls.point_mul(bls.R, h))
        self.assertNotEqual(h, bls.hash_to_g1(b"abc", b"QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_"))


class PairingFriendlyCurves(unittest.TestCase):
    """draft-irtf-cfrg-pairing-friendly-curves: serialization test vectors
    and the optimal ate pairing test vector for BLS12_381."""

    G1_COMPRESSED = bytes.fromhex(
        "97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb")
    G2_COMPRESSED = bytes.fromhex(
        "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
        "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8")

    # e(BP, BP') as e_0, ..., e_11.
    PAIRING = [
        0x11619b45f61edfe3b47a15fac19442526ff489dcda25e59121d9931438907dfd448299a87dde3a649bdba96e84d54558,
        0x153ce14a76a53e205ba8f275ef1137c56a566f638b52d34ba3bf3bf22f277d70f76316218c0dfd583a394b8448d2be7f,
        0x095668fb4a02fe930ed44767834c915b283b1c6ca98c047bd4c272e9ac3f3ba6ff0b05a93e59c71fba77bce995f04692,
        0x16deedaa683124fe7260085184d88f7d036b86f53bb5b7f1fc5e248814782065413e7d958d17960109ea006b2afdeb5f,
        0x09c92cf02f3cd3d2f9d34bc44eee0dd50314ed44ca5d30ce6a9ec0539be7a86b121edc61839ccc908c4bdde256cd6048,
        0x111061f398efc2a97ff825b04d21089e24fd8b93a47e41e60eae7e9b2a38d54fa4dedced0811c34ce528781ab9e929c7,
        0x01ecfcf31c86257ab00b4709c33f1c9c4e007659dd5ffc4a735192167ce197058cfb4c94225e7f1b6c26ad9ba68f63bc,
        0x08890726743a1f94a8193a166800b7787744a8ad8e2f9365db76863e894b7a11d83f90d873567e9d645ccf725b32d26f,
        0x0e61c752414ca5dfd258e9606bac08daec29b3e2c57062669556954fb227d3f1260eedf25446a086b0844bcd43646c10,
        0x0fe63f185f56dd29150fc498bbeea78969e7e783043620db33f75a05a0a2ce5c442beaff9da195ff15164c00ab66bdde,
        0x10900338a92ed0b47af211636f7cfdec717b7ee43900eee9b5fc24f0000c5874d4801372db478987691c566a8c474978,
        0x1454814f3085f0e6602247671bc408bbce2007201536818c901dbd4d2095dd86c1ec8b888e59611f60a301af7776be3d,
    ]

    def test_generators(self):
        g1, g2 = bls.G1_GENERATOR, bls.G2_GENERATOR
        self.assertTrue(bls.is_on_curve(g1, bls.B1))
        self.assertTrue(bls.is_on_curve(g2, bls.B2))
        self.assertIsNone(bls.point_mul(bls.R, g1))
        self.assertIsNone(bls.point_mul(bls.R, g2))
        self.assertEqual(bls.encode_g1(g1), self.G1_COMPRESSED)
        self.assertEqual(bls.encode_g2(g2), self.G2_COMPRESSED)
        self.assertEqual(bls.decode_g1(self.G1_COMPRESSED), g1)
        self.assertEqual(bls.decode_g2(self.G2_COMPRESSED), g2)
        # The sort flag selects the other square root: the negation.
        flipped = bytes([self.G1_COMPRESSED[0] ^ 0x20]) + self.G1_COMPRESSED[1:]
        self.assertEqual(bls.decode_g1(flipped), bls.point_neg(g1))
        flipped = bytes([self.G2_COMPRESSED[0] ^ 0x20]) + self.G2_COMPRESSED[1:]
        self.assertEqual(bls.decode_g2(flipped), bls.point_neg(g2))

    def test_identity(self):
        for size, decode, encode in ((48, bls.decode_g1, bls.encode_g1), (96, bls.decode_g2, bls.encode_g2)):
            inf = b"\xc0" + bytes(size - 1)
            self.assertEqual(encode(None), inf)
            self.assertIsNone(decode(inf, allow_identity=True))
            with self.assertRaises(bls.IdentityError):
                decode(inf)
            for bad in (b"\xe0" + bytes(size - 1),            # sort flag
                        b"\x40" + bytes(size - 1),            # not compressed
                        b"\xc1" + bytes(size - 1),            # low bits of byte 0
                        b"\xc0" + bytes(size - 2) + b"\x01",  # last byte
                        b"\xc0" + bytes(size - 2)):           # truncated
                with self.assertRaises(bls.EncodingError):
                    decode(bad, allow_identity=True)

    def test_g2_coordinates_below_p(self):
        x1, x0 = self.G2_COMPRESSED[:48], self.G2_COMPRESSED[48:]
        p = bls.P.to_bytes(48, "big")
        below_p = "coordinate not below p"
        with self.assertRaisesRegex(bls.EncodingError, below_p):   # x_1 = p
            bls.decode_g2(bytes([p[0] | 0x80]) + p[1:] + x0)
        with self.assertRaisesRegex(bls.EncodingError, below_p):   # x_0 = p
            bls.decode_g2(x1 + p)
        with self.assertRaisesRegex(bls.EncodingError, below_p):   # x_0 + p of g2
            bls.decode_g2(x1 + ((bls.G2_GENERATOR[0].c0 + bls.P).to_bytes(48, "big")))

    def test_pairing_vector(self):
        e = bls.pairing(bls.G1_GENERATOR, bls.G2_GENERATOR)
        self.assertEqual(e.coefficients(), self.PAIRING)

    def test_pairing_bilinear(self):
        a, b = 0x1234567890ABCDEF, 0xFEDCBA0987654321
        lhs = bls.pairing(bls.point_mul(a, bls.G1_GENERATOR), bls.point_mul(b, bls.G2_GENERATOR))
        rhs = bls.pairing(bls.G1_GENERATOR, bls.G2_GENERATOR) ** (a * b)
        self.assertEqual(lhs, rhs)
        self.assertNotEqual(rhs, bls.Fp12.one())
        self.assertEqual(rhs ** bls.R, bls.Fp12.one())


class MinSigVectors(unittest.TestCase):
    """crypto/bls12381/testdata/minsig_vectors.json, made by the Go package."""

    @classmethod
    def setUpClass(cls):
        with open(MINSIG_VECTORS, encoding="utf-8") as f:
            cls.file = json.load(f)
        cls.vectors = cls.file["vectors"]

    def test_file(self):
        self.assertEqual(self.file["ciphersuite"].encode(), bls.DST)
        valid = [v for v in self.vectors if v["valid"]]
        self.assertGreaterEqual(len(valid), 4)
        self.assertGreaterEqual(len(self.vectors) - len(valid), 10)
        self.assertEqual(len({v["name"] for v in self.vectors}), len(self.vectors))
        self.assertTrue({v.get("error") for v in self.vectors if not v["valid"]} == set(REASONS))

    def test_vectors(self):
        for v in self.vectors:
            with self.subTest(v["name"]):
                pk = bytes.fromhex(v["public_key"])
                msg = bytes.fromhex(v["message"])
                sig = bytes.fromhex(v["signature"])
                if v["valid"]:
                    self.assertNotIn("error", v)
                    bls.check_signature(pk, msg, sig)  # raises with the reason
                else:
                    with self.assertRaises(REASONS[v["error"]]):
                        bls.check_signature(pk, msg, sig)
                self.assertEqual(bls.verify(pk, msg, sig), v["valid"])

    def test_keys_and_signatures(self):
        """For the vectors with a secret key: the public key is sk * g2 and
        the signature sk * hash_to_G1(message) ([BLS] 2.4 SkToPk, 2.6
        CoreSign), and both re-encode to themselves."""
        n = 0
        for v in self.vectors:
            if "secret_key" not in v:
                continue
            n += 1
            with self.subTest(v["name"]):
                sk = int(v["secret_key"], 16)
                self.assertTrue(0 < sk < bls.R)
                pk = bytes.fromhex(v["public_key"])
                sig = bytes.fromhex(v["signature"])
                msg = bytes.fromhex(v["message"])
                self.assertEqual(bls.encode_g2(bls.point_mul(sk, bls.G2_GENERATOR)), pk)
                self.assertEqual(bls.encode_g1(bls.point_mul(sk, bls.hash_to_g1(msg))), sig)
                self.assertEqual(bls.encode_g2(bls.decode_g2(pk)), pk)
                self.assertEqual(bls.encode_g1(bls.decode_g1(sig)), sig)
        self.assertGreaterEqual(n, 4)


if __name__ == "__main__":
    unittest.main()
