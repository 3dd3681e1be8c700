"""Tests of palisade_agent against a running agent.

PALISADE_AGENT_URL names the agent and PALISADE_SECRET_FILE its secret
file (the agent must have one). cmd/palisade's TestPythonClient starts a
testnet and an agent and runs these:

    $ PALISADE_AGENT_URL=http://127.0.0.1:7071 PALISADE_SECRET_FILE=secret \\
        python3 -m unittest -v clients/python/test_palisade_agent.py
"""

import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import palisade_agent as pa  # noqa: E402

URL = os.environ.get("PALISADE_AGENT_URL")
SECRET_FILE = os.environ.get("PALISADE_SECRET_FILE")


def secret():
    with open(SECRET_FILE) as f:
        return f.read()


@unittest.skipUnless(URL and SECRET_FILE, "PALISADE_AGENT_URL and PALISADE_SECRET_FILE name no agent")
class AgentTest(unittest.TestCase):
    def setUp(self):
        self.agent = pa.Agent(URL, secret=secret())
        # A resource of its own per test: they do not wait for each other.
        self.resource = "py-" + uuid.uuid4().hex[:12]

    def test_acquire_read_release(self):
        lock = self.agent.acquire(self.resource, ttl=5)
        self.assertEqual(lock.state, "held")
        self.assertEqual(lock.resource, self.resource)
        self.assertTrue(lock.token.startswith("pt3."))
        self.assertRegex(lock.id, r"^[0-9a-f]{32}$")
        self.assertRegex(lock.session, r"^[0-9a-f]{32}$")
        self.assertEqual(lock.ttl, "5s")
        self.assertEqual(lock.headers, {"Palisade-Token": lock.token})
        same = self.agent.lock(lock.id)
        self.assertEqual((same.token, same.state), (lock.token, "held"))
        lock.release()
        self.assertEqual(lock.state, "released")
        lock.release()  # harmless
        self.assertEqual(self.agent.lock(lock.id).state, "released")

    def test_busy_then_wait(self):
        with self.agent.acquire(self.resource, ttl=5) as lock:
            with self.assertRaises(pa.BusyError) as cm:
                self.agent.acquire(self.resource)
            self.assertEqual((cm.exception.status, cm.exception.code), (409, "busy"))
            # A waiting acquisition gets it once the holder lets go.
            threading.Timer(0.3, lock.release).start()
            with self.agent.acquire(self.resource, wait=30) as second:
                self.assertGreater(second.epoch, lock.epoch)

    def test_long_poll_ends_with_release(self):
        lock = self.agent.acquire(self.resource, ttl=5)
        start = time.monotonic()
        self.assertEqual(lock.refresh(wait=0), "held")
        self.assertLess(time.monotonic() - start, 5, "wait=0 answers at once")
        threading.Timer(0.3, lock.release).start()
        self.assertEqual(lock.wait_until_ended(timeout=30), "released")

    def test_errors(self):
        with self.assertRaises(pa.AgentError) as cm:
            self.agent.acquire(self.resource, ttl=0)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        with self.assertRaises(pa.AgentError) as cm:
            self.agent.acquire("bad\x01name")
        self.assertEqual(cm.exception.code, "bad_request")
        with self.assertRaises(pa.AgentError) as cm:
            self.agent.lock("0" * 32)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        for wrong in (None, secret().strip() + "x"):
            with self.assertRaises(pa.AgentError) as cm:
                pa.Agent(URL, secret=wrong).acquire(self.resource)
            self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorised"))


if __name__ == "__main__":
    unittest.main()
