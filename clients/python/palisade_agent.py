"""A client for the Palisade agent's HTTP/JSON lock API.

The agent ("palisade agent", reference in docs/agent.md) holds Palisade
locks for applications in any language and renews their leases. This
module needs only the Python standard library (3.8 or later):

    from palisade_agent import Agent, BusyError

    agent = Agent("http://127.0.0.1:7071")
    with agent.acquire("orders-db", ttl=10, wait=30) as lock:
        # Send lock.token with every write; the resource checks it.
        put(url, body, headers={"Palisade-Token": lock.token})
    # Leaving the block released the lock.

Every error the agent reports raises AgentError (or one of its
subclasses), whose .code is the agent's stable machine code ("busy",
"not_enough_nodes", "refused", "bad_request", "not_found",
"unauthorised", ...) and .status the HTTP status.
"""

import http.client
import json
import time
import urllib.parse

__all__ = [
    "Agent",
    "AgentError",
    "BusyError",
    "Lock",
    "NotEnoughNodesError",
    "RefusedError",
]


class AgentError(Exception):
    """An error answer of the agent: .status, .code, .message, .body."""

    def __init__(self, status, code, message, body):
        super().__init__("%s (HTTP %d): %s" % (code, status, message))
        self.status = status
        self.code = code
        self.message = message
        self.body = body


class BusyError(AgentError):
    """Another holder has the resource (code "busy", HTTP 409).

    .holder, .epoch and .left describe the holder when the cluster named
    it; .retry_after is the Retry-After header in seconds, or None.
    """

    def __init__(self, status, code, message, body, retry_after=None):
        super().__init__(status, code, message, body)
        self.holder = body.get("holder")
        self.epoch = body.get("epoch")
        self.left = body.get("left")
        self.retry_after = retry_after


class NotEnoughNodesError(AgentError):
    """Fewer than 2f+1 nodes answered (code "not_enough_nodes", HTTP 503);
    .nodes lists the failed nodes' indices."""

    def __init__(self, status, code, message, body):
        super().__init__(status, code, message, body)
        self.nodes = body.get("nodes", [])


class RefusedError(AgentError):
    """The cluster refused for good (code "refused", HTTP 403), e.g. the
    agent's identity may not lock this resource."""


_ERRORS = {
    "busy": BusyError,
    "not_enough_nodes": NotEnoughNodesError,
    "refused": RefusedError,
}


def _duration(seconds):
    """Formats seconds as a Go duration in milliseconds ("1500ms")."""
    if seconds < 0:
        raise ValueError("a duration must not be negative")
    return "%dms" % round(seconds * 1000)


class Lock:
    """A lock the agent holds. Send .token with every write.

    .state is "held", "released" or "lost" (then .reason says why), as of
    the last answer of the agent; refresh() and wait_until_ended() ask
    again. A lock is a context manager that releases it on exit.
    """

    def __init__(self, agent, info):
        self._agent = agent
        self._update(info)

    def _update(self, info):
        self.id = info["id"]
        self.resource = info["resource"]
        self.token = info["token"]
        self.epoch = info["epoch"]
        self.holder = info["holder"]
        self.session = info["session"]
        self.ttl = info["ttl"]
        self.state = info["state"]
        self.reason = info.get("reason", "")

    @property
    def headers(self):
        """The header that carries the token to "palisade resource"."""
        return {"Palisade-Token": self.token}

    def refresh(self, wait=0.0):
        """Asks the agent for the lock's state, waiting up to wait seconds
        while it is held (a long poll); returns the state."""
        info = self._agent._request(
            "GET",
            "/v1/locks/%s?wait=%s" % (self.id, _duration(wait)),
            timeout=wait + self._agent.timeout,
        )
        self._update(info)
        return self.state

    def wait_until_ended(self, timeout=None, poll=60.0):
        """Long-polls until the lock is released or lost, or timeout
        seconds passed (None: no limit); returns the state."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = poll if end is None else max(0.0, min(poll, end - time.monotonic()))
            state = self.refresh(wait)
            if state != "held" or (end is not None and time.monotonic() >= end):
                return state

    def release(self):
        """Releases the lock (its renewal stops; the cluster frees the
        resource). Releasing an ended lock does no harm."""
        info = self._agent._request("DELETE", "/v1/locks/%s" % self.id)
        self._update(info)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        return "Lock(resource=%r, epoch=%d, state=%r, id=%s...)" % (
            self.resource,
            self.epoch,
            self.state,
            self.id[:8],
        )


class Agent:
    """A connection to a Palisade agent at url ("http://HOST:PORT").

    secret is the agent's bearer secret (its --secret-file content), if it
    has one. timeout bounds each request beyond the waits it asks for.
    """

    def __init__(self, url="http://127.0.0.1:7071", secret=None, timeout=30.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError("agent URL must be http://HOST:PORT, got %r" % url)
        self._host = u.hostname
        self._port = u.port or 80
        self._secret = secret.strip() if secret else None
        self.timeout = timeout

    def acquire(self, resource, ttl=10.0, wait=0.0):
        """Acquires resource with a lease of ttl seconds, which the agent
        renews. wait=0 tries once (BusyError at once if it is held);
        otherwise the agent waits up to wait seconds for it."""
        body = {"ttl": _duration(ttl), "wait": _duration(wait)}
        path = "/v1/locks/" + urllib.parse.quote(resource, safe="")
        info = self._request("POST", path, body, timeout=wait + self.timeout)
        return Lock(self, info)

    def lock(self, lock_id):
        """Returns the lock with this ID as the agent has it now."""
        return Lock(self, self._request("GET", "/v1/locks/%s?wait=0s" % lock_id))

    def _request(self, method, path, body=None, timeout=None):
        conn = http.client.HTTPConnection(
            self._host, self._port, timeout=timeout or self.timeout
        )
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            if self._secret:
                headers["Authorization"] = "Bearer " + self._secret
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            retry_after = resp.getheader("Retry-After")
        finally:
            conn.close()
        try:
            doc = json.loads(raw)
        except ValueError:
            raise AgentError(resp.status, "internal", "not JSON: %r" % raw[:200], {})
        if 200 <= resp.status < 300:
            return doc
        code = doc.get("code", "internal")
        cls = _ERRORS.get(code, AgentError)
        if cls is BusyError:
            raise BusyError(
                resp.status,
                code,
                doc.get("message", ""),
                doc,
                int(retry_after) if retry_after else None,
            )
        raise cls(resp.status, code, doc.get("message", ""), doc)
