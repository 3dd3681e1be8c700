package cli

// The usage texts of the operator commands (ops.go, status.go, audit.go,
// clients.go).

const probeUsage = `Usage:
    palisade probe [--timeout D] URL

Sends one GET to URL and exits 0 if the answer is 2xx, 1 otherwise
(including no answer within --timeout), printing one line: the status and
the first line of the body. It is a healthcheck for containers that have
no curl, such as the FROM-scratch image:

    healthcheck:
      test: ["CMD", "/palisade", "probe", "http://127.0.0.1:9090/readyz"]

Flags (environment variable in brackets):
    --timeout D   bound on the whole request (5s) [PALISADE_TIMEOUT]

Example:
    $ palisade node --dir /tmp/pal/node1 --admin 127.0.0.1:9090 &
    $ palisade probe http://127.0.0.1:9090/readyz
    http://127.0.0.1:9090/readyz: 200 OK: ready: 4 of 4 members reachable (t=3), store open
    $ palisade probe http://127.0.0.1:9090/readyz
    palisade: error: probe http://127.0.0.1:9090/readyz: 503 Service Unavailable: node: not ready: 2 of 4 members reachable, need t=3; [...]
`

const statusUsage = `Usage:
    palisade status --cluster FILE [--cluster-id ID] --identity FILE [--timeout D] [RESOURCE]

Asks every member of the cluster for its status over libp2p and prints one
line per member: whether it answered within --timeout, its version (from
libp2p identify: "palisade/VERSION") and the round-trip time of its
Status call. With RESOURCE, each line also has the member's last epoch
for it and the lease holder, by client name where the cluster file has
one. A last line counts the members that answered.

Members admit only the cluster file's members and clients, so status dials
with a client key (--identity, as for acquire) or a member's own
identity.key (an operator on a node's machine); a client sees only the
resources its patterns allow (for others, nodes answer as for an unused
resource, and status says so). A member's own identity cannot speak
libp2p to that member itself (a host never dials its own peer ID): its
line says self=true and only checks that the member's address accepts
TCP connections.

Exit status: 0 if at least t = 2f+1 members answered, 4 ("not enough
nodes": no token can be issued) if fewer did, 5 if the identity is
neither a client nor a member in --cluster or more than f members drop
its connection (their cluster.json does not admit it, whatever --cluster
says), 1 on other errors.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE   a client's key file, or a member's identity.key,
                      mode 0600 [PALISADE_IDENTITY]
    --timeout D       how long to wait for each member (5s) [PALISADE_TIMEOUT]

Example:
    $ export PALISADE_CLUSTER=/tmp/pal/cluster.json PALISADE_IDENTITY=/tmp/pal/client.key
    $ palisade status orders-db
    node=1 peer=12D3KooW[...] reachable=true version=palisade/v1.2.3 rtt=412µs last_epoch=3 holder=client1 session=5e1f09aa lease_epoch=3 lease_left=8.204s
    node=2 peer=12D3KooW[...] reachable=true version=palisade/v1.2.3 rtt=388µs last_epoch=3 holder=client1 [...]
    node=3 peer=12D3KooW[...] reachable=true version=palisade/v1.2.3 rtt=397µs last_epoch=3 holder=client1 [...]
    node=4 peer=12D3KooW[...] reachable=false error="failed to dial: [...] connection refused"
    3 of 4 members reachable (t=3)
`

const auditUsage = `Usage:
    palisade audit --dir DIR/nodeI
    palisade audit --admin ADDR (--dir DIR/nodeI | --secret-file FILE)

Prints a node's append-only audit log, one entry per line with its
sequence number: votes, commits, renewals, releases, abandoned votes,
expiries, catch-ups and operator revocations, each with its resource,
epoch and holder (by client name where the node's cluster.json has one).
Then it checks the sequence: entries must run 1, 2, 3, ... up to the
store's counter with no gap, and each must carry its own number; a gap or
a broken entry is reported on stderr and the exit status is 1.

Without --admin, audit reads the node's vote store (DIR/nodeI/votes.db),
which a running node holds locked: stop the node first, or audit says
that the store is in use. With --admin, audit reads the log of the
running node from its admin API (GET /audit, the address of "palisade
node --admin"), which serves the same entries from the open store. The
admin API asks for the node's admin secret, DIR/nodeI/admin.secret (the
node writes it, mode 0600, when it first starts): only the node's
operator reads its log.

Flags (environment variable in brackets):
    --dir DIR            the node directory [PALISADE_DIR]
    --admin ADDR         a running node's admin address, HOST:PORT or URL [PALISADE_ADMIN]
    --secret-file FILE   the admin secret file, instead of DIR/admin.secret [PALISADE_SECRET_FILE]

Example:
    $ palisade audit --dir /tmp/pal/node2
    seq=1 time=2026-03-01T10:00:00.123Z kind=vote resource=orders-db epoch=1 holder=client1/5e1f09aa[...]
    seq=2 time=2026-03-01T10:00:00.125Z kind=commit resource=orders-db epoch=1 holder=client1/5e1f09aa[...]
    2 entries, sequence 1..2 without gaps
    $ palisade audit --admin 127.0.0.1:9102 --dir /tmp/pal/node2     # while node 2 runs
    [...]
`

const clientsUsage = `Usage:
    palisade clients list         --cluster FILE [--cluster-id ID]
    palisade clients add          --cluster FILE [--cluster-id ID] [--patterns P,...] NAME PEERID
    palisade clients set-patterns --cluster FILE [--cluster-id ID] --patterns P,... NAME
    palisade clients remove       --cluster FILE [--cluster-id ID] NAME

Lists or edits the clients of a cluster file: which client identities
(libp2p peer IDs, from "palisade identity") may acquire which resources.
In a pattern, * matches any run of characters, "/" included. Each edit
checks the whole file as nodes do and replaces FILE atomically (a
temporary file, fsynced, renamed over it). Only the clients change, so
resources keep their configuration and tokens stay valid.

To roll a change out, copy the file into every node's directory and send
each node SIGHUP: the node re-reads DIR/cluster.json and takes the new
client list at once (removed clients are disconnected); anything else
that differs (group key, cluster ID, N, t, members, epochs) makes the node
refuse the file, log why and keep its configuration. A testnet process
reloads each of its nodes from its own DIR/nodeI/cluster.json. Other
palisade processes on the machine survive the signal too: agent and
resource keep their locks and data and check their own files again;
"palisade lock" passes it on to its COMMAND. So "kill -HUP $(pidof
palisade)" is safe on a node's machine, as long as no "palisade lock"
COMMAND there minds a SIGHUP; otherwise signal the node's PID alone.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file to read and write [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --patterns P,...  resource patterns, separated by commas (*) [PALISADE_PATTERNS]

Example:
    $ palisade identity --identity app.key
    12D3KooWQNATWGRydd6BNsAu8WAsHbCXiJhimjACUCQfSuJ5LBXC
    $ palisade clients add --cluster cluster.json --patterns 'orders-*,jobs/*' \
        app 12D3KooWQNATWGRydd6BNsAu8WAsHbCXiJhimjACUCQfSuJ5LBXC
    name=app peer=12D3KooWQNAT[...] patterns=orders-*,jobs/*
    $ for h in node1 node2 node3 node4; do scp cluster.json $h:/var/lib/palisade/; done
    $ for h in node1 node2 node3 node4; do ssh $h 'kill -HUP $(pidof palisade)'; done
    $ palisade clients list --cluster cluster.json
    name=client1 peer=12D3KooW[...] patterns=*
    name=app peer=12D3KooWQNAT[...] patterns=orders-*,jobs/*
`
