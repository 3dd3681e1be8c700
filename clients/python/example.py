#!/usr/bin/env python3
"""Fencing through the Palisade agent, from Python (standard library only).

Acquires a lock through the agent, writes to a fenced key-value store
("palisade resource") with the lock's token, releases it; then acquires
again (a higher epoch), writes, and shows that the first token is now
refused by the resource (HTTP 409, stale): fencing, not the lease, is what
protects the data.

    $ palisade testnet --nodes 4 --dir /tmp/pal &
    $ palisade resource --cluster /tmp/pal/cluster.json --data /tmp/res &
    $ palisade agent --cluster /tmp/pal/cluster.json --identity /tmp/pal/client.key &
    $ python3 clients/python/example.py orders-db
    acquired "orders-db" at epoch 1
    wrote "paid" with the token (HTTP 204)
    read back "paid"
    released epoch 1
    acquired "orders-db" at epoch 2 and wrote "shipped"
    the epoch-1 token is refused: HTTP 409
    released epoch 2
"""

import argparse
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from palisade_agent import Agent  # noqa: E402


def kv(method, base, resource, token, body=None):
    """One request to "palisade resource"; returns (status, body)."""
    url = "%s/kv/%s" % (base.rstrip("/"), urllib.parse.quote(resource, safe=""))
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("Palisade-Token", token)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("resource", nargs="?", default="orders-db")
    p.add_argument("--agent", default=os.environ.get("PALISADE_AGENT_URL", "http://127.0.0.1:7071"))
    p.add_argument("--kv", default=os.environ.get("PALISADE_RESOURCE_URL", "http://127.0.0.1:7070"),
                   help="base URL of palisade resource")
    p.add_argument("--secret-file", default=os.environ.get("PALISADE_SECRET_FILE"))
    args = p.parse_args()
    secret = None
    if args.secret_file:
        with open(args.secret_file) as f:
            secret = f.read()
    agent = Agent(args.agent, secret=secret)

    with agent.acquire(args.resource, ttl=10, wait=30) as first:
        print('acquired "%s" at epoch %d' % (first.resource, first.epoch))
        status, _ = kv("PUT", args.kv, args.resource, first.token, b"paid")
        if status != 204:
            sys.exit("write with the token: HTTP %d, want 204" % status)
        print('wrote "paid" with the token (HTTP %d)' % status)
        status, body = kv("GET", args.kv, args.resource, first.token)
        if status != 200 or body != b"paid":
            sys.exit("read back: HTTP %d %r" % (status, body))
        print('read back "%s"' % body.decode())
    print("released epoch %d" % first.epoch)
    if first.state != "released":
        sys.exit("state after release: %s" % first.state)

    with agent.acquire(args.resource, ttl=10, wait=30) as second:
        if second.epoch <= first.epoch:
            sys.exit("second epoch %d not above %d" % (second.epoch, first.epoch))
        status, _ = kv("PUT", args.kv, args.resource, second.token, b"shipped")
        if status != 204:
            sys.exit("write with the second token: HTTP %d" % status)
        print('acquired "%s" at epoch %d and wrote "shipped"' % (second.resource, second.epoch))
        status, _ = kv("PUT", args.kv, args.resource, first.token, b"paid again")
        if status != 409:
            sys.exit("the old token got HTTP %d, want 409" % status)
        print("the epoch-%d token is refused: HTTP %d" % (first.epoch, status))
    print("released epoch %d" % second.epoch)


if __name__ == "__main__":
    main()
