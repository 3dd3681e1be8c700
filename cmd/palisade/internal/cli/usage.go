package cli

// The usage texts: a synopsis, the flags with their defaults and
// environment variables, and a worked example session. "palisade help" and
// "palisade COMMAND -h" print them on stdout.

const usage = `Palisade issues fencing tokens that no single machine can forge.

Usage:
    palisade keygen  --nodes N --dir DIR [--name NAME] [--host HOST] [--base-port PORT]
    palisade node    --dir DIR/nodeI [--listen ADDRS] [--admin ADDR]
    palisade testnet --nodes N --dir DIR [--dkg] [--admin ADDR] [--name NAME] [--host HOST] [--base-port PORT]
    palisade identity --identity FILE
    palisade dkg     --members FILE --identity FILE --dir DIR [--phase-timeout D]
                     [--listen ADDRS] [--ceremony-listen ADDRS] [--restart]
    palisade reshare --members FILE --identity FILE --dir DIR (--old-dir DIR | --cluster FILE [--cluster-id ID])
                     [--phase-timeout D] [--listen ADDRS] [--ceremony-listen ADDRS] [--restart]
    palisade acquire --cluster FILE [--cluster-id ID] --identity FILE [--ttl D] [--wait D] RESOURCE
    palisade lock    --cluster FILE [--cluster-id ID] --identity FILE [--ttl D] [--wait D] [--grace D] RESOURCE -- COMMAND [ARGS]
    palisade release --cluster FILE [--cluster-id ID] --identity FILE TOKEN
    palisade verify  --cluster FILE [--cluster-id ID] [--json] TOKEN
    palisade demo    [--seed N]
    palisade bench   [--nodes N] [--clients K] [--cycles C] [--contended]
    palisade evidence --dir DIR/nodeI
    palisade fork    --cluster FILE [--cluster-id ID] FILE
    palisade forensics --cluster FILE [--cluster-id ID] --identity FILE RESOURCE EPOCH
    palisade resource --cluster FILE [--cluster-id ID] --data DIR [--listen ADDR] [--admin ADDR]
    palisade status  --cluster FILE [--cluster-id ID] --identity FILE [--timeout D] [RESOURCE]
    palisade audit   --dir DIR/nodeI | --admin ADDR (--dir DIR/nodeI | --secret-file FILE)
    palisade locks   --cluster FILE [--cluster-id ID] --identity FILE [--timeout D] [--after RESOURCE] [--limit N]
    palisade revoke  --admin ADDR (--dir DIR/nodeI | --secret-file FILE) [--epoch E] RESOURCE
    palisade clients (list | add NAME PEERID | set-patterns NAME | remove NAME) --cluster FILE [--cluster-id ID] [--patterns P,...]
    palisade probe   [--timeout D] URL
    palisade bootstrap node --shared DIR --index I --addr MULTIADDR --dir DIR --identity FILE
                     [--nodes N] [--name NAME] [--join-timeout D] [--phase-timeout D] [--admin ADDR]
                     [--cluster-id ID]
    palisade bootstrap client --shared DIR [--identity FILE] [--join-timeout D] [--admin ADDR]
                     [--cluster-id ID]
    palisade bootstrap resource --shared DIR --data DIR [--listen ADDR] [--join-timeout D] [--admin ADDR]
                     [--cluster-id ID]
    palisade put     --cluster FILE [--cluster-id ID] --identity FILE --url URL [--ttl D] [--wait D]
                     [--every D] [--for D] RESOURCE VALUE
    palisade agent   --cluster FILE [--cluster-id ID] --identity FILE [--listen ADDR] [--secret-file FILE]
                     [--max-locks N] [--admin ADDR]
    palisade version
    palisade completion bash|zsh
    palisade help    [COMMAND]

Every flag can also be set by an environment variable named after it:
--cluster is PALISADE_CLUSTER, --base-port is PALISADE_BASE_PORT. A flag on
the command line wins over the variable. Logs go to stderr; GOLOG_LOG_LEVEL
sets their levels (default: warn, and info for palisade/*),
PALISADE_LOG_LEVEL the level of palisade/* alone (debug keeps libp2p
quiet), and GOLOG_LOG_FMT=json makes them JSON lines.

Example:
    $ palisade testnet --nodes 4 --dir /tmp/palisade &
    WARNING: trusted-dealer key generation: [...]
    ready
    $ export PALISADE_CLUSTER=/tmp/palisade/cluster.json
    $ export PALISADE_IDENTITY=/tmp/palisade/client.key
    $ TOKEN=$(palisade acquire --ttl 30s orders-db)
    $ palisade verify "$TOKEN"
    resource=orders-db epoch=1 holder=12D3KooW[...] session=[...]
    $ palisade release "$TOKEN"
    $ palisade lock --wait 1m nightly-report -- ./report.sh
    $ palisade demo
    [the fencing story, step by step]

` + exitCodes + `
Run "palisade help COMMAND" for more about one command.
`

const keygenUsage = `Usage:
    palisade keygen --nodes N --dir DIR [--name NAME] [--host HOST] [--base-port PORT]

Deals a fresh threshold key with a TRUSTED DEALER and writes DIR/cluster.json
(public: give it to every resource that verifies tokens), DIR/client.key (a
client identity authorised for every resource) and DIR/node1 ... DIR/nodeN
(one directory per node, with its secret share). One process sees the group
secret: this is for local testnets only, and keygen says so on stderr.

Flags (environment variable in brackets):
    --nodes N         number of nodes; N = 3f+1 tolerates f faults (4) [PALISADE_NODES]
    --dir DIR         output directory; refused if it has a cluster.json [PALISADE_DIR]
    --name NAME       cluster name (palisade-testnet) [PALISADE_NAME]
    --host HOST       the nodes' address: one IP or DNS name for all, or N of
                      them separated by commas (127.0.0.1) [PALISADE_HOST]
    --base-port PORT  node i listens on TCP port PORT+i; 0 picks free ports
                      on 127.0.0.1 (0) [PALISADE_BASE_PORT]

A node whose host is a DNS name listens on 0.0.0.0 at its port and is
reached at /dns4/HOST/tcp/PORT.

Example:
    $ palisade keygen --nodes 4 --dir /tmp/pal
    WARNING: trusted-dealer key generation: [...]
    cluster palisade-testnet n=4 t=3 id=5f0c[...]
    node1 /ip4/127.0.0.1/tcp/40123 12D3KooW[...]
    [...]
    4 nodes tolerate 1 faulty node (f = 1, 3 signatures needed)
    $ palisade node --dir /tmp/pal/node1 &
    $ palisade keygen --nodes 4 --dir compose-data --base-port 4000 \
        --host 10.77.0.11,10.77.0.12,10.77.0.13,10.77.0.14
`

const nodeUsage = `Usage:
    palisade node --dir DIR/nodeI [--listen ADDRS] [--admin ADDR]

Runs one node from a directory written by keygen: it opens the node's vote
store (DIR/nodeI/votes.db, so a restarted node keeps its votes), listens on
the address in DIR/nodeI/node.json and answers members and authorised
clients only. It logs "node I listening on ADDR peer ID", then one line
per decision (vote, busy, refuse, commit, release), and runs until SIGINT
or SIGTERM.

On SIGHUP it re-reads DIR/nodeI/cluster.json and takes its client list
(see "palisade clients"); a file that changes anything else is refused
and logged, and the node keeps its configuration.

With --admin it serves HTTP on ADDR, apart from the libp2p address:
/metrics (Prometheus), /healthz (200 while it runs) and /readyz (200 while
its vote store answers and at least t = 2f+1 members, itself included,
answered its last probe; it probes every member over libp2p every 2s).

Flags (environment variable in brackets):
    --dir DIR       the node directory [PALISADE_DIR]
    --listen ADDRS  libp2p addresses to bind, comma-separated, for this run
                    (node.json's listen, else the announced ones) [PALISADE_LISTEN]
    --admin ADDR    serve /metrics, /healthz and /readyz on ADDR (none)
                    [PALISADE_ADMIN]

Example:
    $ palisade keygen --nodes 4 --dir /tmp/pal
    $ for i in 1 2 3 4; do palisade node --dir /tmp/pal/node$i --admin 127.0.0.1:909$i & done
    [...] INFO palisade/cli node 1 listening on /ip4/127.0.0.1/tcp/40123 peer 12D3KooW[...]
    $ palisade probe http://127.0.0.1:9091/readyz
    http://127.0.0.1:9091/readyz: 200 OK: ready: 4 of 4 members reachable (t=3), store open
    $ kill -HUP %1    # node 1 reloads /tmp/pal/node1/cluster.json
`

const testnetUsage = `Usage:
    palisade testnet --nodes N --dir DIR [--dkg] [--admin ADDR]
                     [--name NAME] [--host HOST] [--base-port PORT]

Runs a whole local testnet in one process. If DIR has no cluster.json it
first runs keygen (a trusted dealer: testnets only), or with --dkg a
distributed key generation among N in-process members over loopback (no
process sees the group secret); otherwise it reuses the keys and the nodes'
vote stores in DIR. It prints "ready" on stdout once every node listens,
and runs until SIGINT or SIGTERM.

Flags (environment variable in brackets):
    --nodes N         number of nodes, for a new DIR (4) [PALISADE_NODES]
    --dir DIR         the testnet directory [PALISADE_DIR]
    --dkg             make a new DIR's keys by DKG, on free 127.0.0.1
                      ports; N at least 4 [PALISADE_DKG]
    --admin ADDR      serve each node's /metrics, /healthz and /readyz (as
                      for node): node i on ADDR's port + i - 1, or on a
                      free port each if the port is 0; the addresses are
                      printed on stderr (none) [PALISADE_ADMIN]
    --name, --host, --base-port   as for keygen, for a new DIR

SIGHUP makes every node re-read its DIR/nodeI/cluster.json, as for node.

Example:
    $ palisade testnet --nodes 4 --dir /tmp/palisade &
    ready
    $ palisade acquire --cluster /tmp/palisade/cluster.json \
        --identity /tmp/palisade/client.key orders-db
    pt3.A[...]
`

const acquireUsage = `Usage:
    palisade acquire --cluster FILE [--cluster-id ID] --identity FILE [--ttl D] [--wait D] RESOURCE

Acquires a lease on RESOURCE and prints its fencing token on stdout. The
command exits at once and does not release the lease: it runs out after
the TTL ("palisade release TOKEN" ends it sooner), and the token stays
valid at resources until a newer one is used. On failure it says why in
one line (who holds RESOURCE, or which nodes failed or refused and how)
and exits 3 if RESOURCE is busy, 4 if too few nodes answered, 5 if the
identity may not acquire it, 1 otherwise. "palisade lock" holds a lease
while a command runs.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE   the client's key file, mode 0600 [PALISADE_IDENTITY]
    --ttl D           lease length, at most 1h (10s) [PALISADE_TTL]
    --wait D          wait up to D for a busy resource or for nodes to come
                      back; 0 tries once (0) [PALISADE_WAIT]

Example:
    $ export PALISADE_CLUSTER=/tmp/palisade/cluster.json
    $ export PALISADE_IDENTITY=/tmp/palisade/client.key
    $ TOKEN=$(palisade acquire --ttl 30s orders-db)
    $ curl -H "Palisade-Token: $TOKEN" [...]
    $ palisade acquire --wait 40s orders-db
    pt3.A[...]
`

const forkUsage = `Usage:
    palisade fork --cluster FILE [--cluster-id ID] FILE

Checks a fork proof offline against the cluster's group public key and
prints it. A fork is two valid tokens of one cluster for the same resource
and epoch with different holders (another session of the same identity
counts): at most f misbehaving nodes cannot make one, so it proves that
more than f nodes signed twice at that epoch, or were restored from old
copies of their vote stores. A fenced resource refuses the second holder
and keeps the proof ("palisade resource" logs it, as "fork", at error
level). FILE holds its text form ("pf3." and base64) or the binary form a
store's fork record holds; "-" reads stdin.

If FILE proves a fork of the cluster, fork prints "fork resource=R
epoch=E cluster=C id=ID", one line per token ("holder=H session=S
token=T") and the verdict, and exits 0. Otherwise it says why (not a fork
proof, tokens that do not fork, another cluster's, a signature that does
not verify) and exits 6. Other failures (FILE missing) exit 1.

The proof holds both holders' tokens: keep it where you keep tokens.

Flags (environment variable in brackets):
    --cluster FILE   the cluster file [PALISADE_CLUSTER]
    --cluster-id ID  refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]

Example:
    $ palisade fork --cluster /tmp/palisade/cluster.json fork.txt
    fork resource=orders-db epoch=7 cluster=[...] id=[...]
    holder=12D3KooW[...] session=[...] token=pt3.[...]
    holder=12D3KooW[...] session=[...] token=pt3.[...]
    valid: both tokens verify under the group key of "palisade-testnet": [...]
    $ echo $?
    0
`

const verifyUsage = `Usage:
    palisade verify --cluster FILE [--cluster-id ID] [--json] TOKEN

Checks TOKEN (its text form; "-" reads it from stdin) offline against the
cluster's group public key. If it is valid, verify prints one line
"resource=R epoch=E holder=H session=S" and exits 0: H is the identity of
the client that acquired, S the lock session of that one acquisition
(another process with the same identity is another session). Otherwise
it prints why
(malformed, invalid signature, another cluster) and exits 1. It does not
check barriers: that is the resource's job.

With --json it prints one JSON object on stdout instead, for scripts,
whether the token is valid or not: "valid", the token's fields when it
decodes ("cluster", "resource", "epoch", "holder", "session"),
"signature_check" (valid, invalid or not_checked), what another
implementation of the ciphersuite needs to check the signature itself
("ciphersuite", "dst", "group_key", and when the token decodes
"message", the signed bytes, and "signature", all hex) and, if refused,
"error" with a "code" (malformed, old_version, wrong_cluster,
invalid_signature; see docs/token-format.md) and a "message".

Flags (environment variable in brackets):
    --cluster FILE   the cluster file [PALISADE_CLUSTER]
    --cluster-id ID  refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --json           print the result as JSON [PALISADE_JSON]

Example:
    $ palisade verify --cluster /tmp/palisade/cluster.json "$TOKEN"
    resource=orders-db epoch=1 holder=12D3KooW[...] session=[...]
    $ palisade verify --cluster /tmp/palisade/cluster.json pt3.garbage
    palisade: error: token rejected: malformed token ([...]): pass the whole text acquire printed, starting with "pt3."
    $ palisade verify --json --cluster /tmp/palisade/cluster.json "$TOKEN"
    {"valid":true,"cluster":"5f0c[...]","resource":"orders-db","epoch":1,"holder":"12D3KooW[...]","session":"[...]","signature_check":"valid","ciphersuite":"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_",[...],"signature":"96c8[...]"}
`

const demoUsage = `Usage:
    palisade demo [--seed N]

Tells the fencing story by running it, in a temporary directory that is
removed afterwards: 4 nodes in process, a fenced key-value store ("palisade
resource", in process, written to over HTTP on 127.0.0.1), two clients.
Client 1 takes "orders-db" with a 1s lease and writes; it pauses and its
lease runs out; client 2 takes a higher epoch and writes; client 1's late
write is refused as stale (409), also after the resource restarts; with one
node stopped, tokens are still issued. Each step prints ✓ or ✗; the
exit status is 0 only if every step behaved. It takes a few seconds.

Flags (environment variable in brackets):
    --seed N   seeds the demo's keys (1) [PALISADE_SEED]

Example:
    $ palisade demo
    ✓ 1. client 1 acquired "orders-db" at epoch 1 (lease 1s) and wrote "paid (by client 1)" over HTTP
    [...]
`

const helpUsage = `Usage:
    palisade help [COMMAND]

Prints the usage of palisade or of one command.

Example:
    $ palisade help acquire
`

const benchUsage = `Usage:
    palisade bench [--nodes N] [--clients K] [--cycles C] [--contended]

Measures acquire and release latency on an in-process cluster of N nodes
over loopback TCP (keys in a temporary directory, removed afterwards):
K clients run K*C acquire+release cycles in all, drawn from one budget,
on their own resources or, with --contended, all on one. Prints
p50/p90/p99 latencies and cycles/s; --contended adds the handoffs per
second, the time the resource stood free between holders (gap), and
the spread of grants per client. One warm-up cycle per client is not
counted. The side-by-side benchmark against etcd is the bench/ module.

Flags (environment variable in brackets):
    --nodes N      cluster size (4) [PALISADE_NODES]
    --clients K    concurrent clients (1) [PALISADE_CLIENTS]
    --cycles C     cycles per client (200) [PALISADE_CYCLES]
    --contended    all clients on one resource (false) [PALISADE_CONTENDED]

Example:
    $ palisade bench --nodes 4 --cycles 100
    nodes=4 clients=1 contended=false cycles=100 failures=0 elapsed=[...]
    acquire  p50=[...] p90=[...] p99=[...]
    release  p50=[...] p90=[...] p99=[...]
    throughput [...] acquire+release cycles/s
`

const evidenceUsage = `Usage:
    palisade evidence --dir DIR/nodeI

Lists the evidence of equivocation a node holds: pairs of votes in which
one node, signing with its identity key, voted for two holders at the same
(resource, epoch). Clients that see such a pair send it to every node;
nodes check it and append it to DIR/nodeI/evidence.jsonl. Each entry is
verified again here against the node directory's cluster.json, and is
printed as one line: the guilty node, resource, epoch, both holders, and
the hex of both signed votes, which anyone can check offline with the
node's public identity key.

It then lists the forks the node recorded (DIR/nodeI/forks.jsonl): two
valid tokens for one (resource, epoch) with different holders, which
prove that more than f nodes signed twice or were restored from old vote
stores. The node records one when it is shown a token that conflicts with
the one it holds as certified (a Commit, a relayed Commit, an Acquire's
proof), or when a member or client passes it one. Each is verified again
here against cluster.json and printed as one line: "fork", its ID,
resource, epoch, both holders, and the fork itself (its text form, which
"palisade fork" checks; "palisade forensics RESOURCE EPOCH" names the
nodes that signed both). Works while the node runs.

Flags (environment variable in brackets):
    --dir DIR   the node directory [PALISADE_DIR]

Example:
    $ palisade evidence --dir /tmp/pal/node2
    node=1 resource=orders-db epoch=7 holders=12D3KooWA…,12D3KooWB… a=01… b=01…
    fork id=5c1e… resource=orders-db epoch=9 holders=12D3KooWA…/1f2e…,12D3KooWC…/77a0… fork=pf3.…
    $ palisade evidence --dir /tmp/pal/node3
    no evidence
`

const resourceUsage = `Usage:
    palisade resource --cluster FILE [--cluster-id ID] --data DIR [--listen ADDR] [--admin ADDR]

Runs the reference fenced resource: an HTTP key-value store that admits a
request only with a valid Palisade token for the key whose epoch is not
below the highest epoch the key has admitted (its barrier). The resource
name is the key. Values, barriers and data versions live in
DIR/resource.db (bbolt, fsynced on every commit), so a restart keeps them.

    PUT    /kv/KEY   store the body (at most 1 MiB)  204, ETag: "VERSION"
    GET    /kv/KEY   read the value                   200 and ETag, or 404
    DELETE /kv/KEY   delete the value                 204

Every request carries the token in the Palisade-Token header: 401 without
a valid token for KEY, 409 if its epoch is below the barrier (which
Palisade-Barrier reports, with "Palisade-Conflict: stale"), 409 with
"Palisade-Conflict: fork" and Palisade-Fork-ID if another holder's valid
token was admitted at its epoch (a fork: more than f nodes misbehaved; the
proof is kept in DIR/resource.db and logged at error level, and "palisade
fork" checks it), 413 if the body is too large. PUT and DELETE
honour If-Match: "VERSION" (a holder with a fresh token but stale data is
refused with 412) and PUT honours If-None-Match: *. A refused request
changes neither the value nor the barrier. SIGINT or SIGTERM stops the
server gracefully. SIGHUP does not stop it: it checks --cluster again and
logs the outcome (a file of the same cluster changes nothing, as only the
cluster ID and group key decide which tokens verify; a file of another
cluster is refused and the resource keeps its own).

With --admin it serves HTTP on ADDR, apart from the fenced API and as
"palisade node --admin" does: /healthz (200 while the store answers a
read, else 503) and /metrics (Prometheus:
palisade_resource_admitted_total by method,
palisade_resource_refused_total by cause (stale, fork, invalid_signature,
wrong_cluster, missing_token, precondition, outcome_unknown, ...),
palisade_resource_forks_total, the forks refused whose proof was kept,
palisade_resource_barrier_epoch_max, the highest barrier raised or met
since it started, palisade_resource_store_seconds, the duration of each
guarded transaction with its fsync, and palisade_config_reloads_total by
result for SIGHUP). It serves nothing secret.

Flags (environment variable in brackets):
    --cluster FILE   the cluster file whose tokens are accepted [PALISADE_CLUSTER]
    --cluster-id ID  refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --data DIR       data directory, created if absent [PALISADE_DATA]
    --listen ADDR    HTTP listen address (127.0.0.1:7070) [PALISADE_LISTEN]
    --admin ADDR     serve /healthz and /metrics on ADDR (none) [PALISADE_ADMIN]

Example:
    $ palisade resource --cluster /tmp/pal/cluster.json --data /tmp/res &
    listening on http://127.0.0.1:7070
    $ TOKEN=$(palisade acquire --cluster /tmp/pal/cluster.json \
        --identity /tmp/pal/client.key orders-db)
    $ curl -X PUT -H "Palisade-Token: $TOKEN" --data paid \
        http://127.0.0.1:7070/kv/orders-db
    $ curl -H "Palisade-Token: $TOKEN" http://127.0.0.1:7070/kv/orders-db
    paid
    $ palisade resource --cluster /tmp/pal/cluster.json --data /tmp/res2 \
        --listen 127.0.0.1:7080 --admin 127.0.0.1:9170 &
    $ palisade probe http://127.0.0.1:9170/healthz
    http://127.0.0.1:9170/healthz: 200 OK: ok: store answers
`

const identityUsage = `Usage:
    palisade identity --identity FILE

Creates a libp2p identity key file (Ed25519, mode 0600) if FILE does not
exist, and prints its peer ID on stdout. Each operator of a multi-
organisation cluster runs it once and sends the peer ID (never the file)
to whoever assembles the member list for dkg.

Flags (environment variable in brackets):
    --identity FILE   the identity key file [PALISADE_IDENTITY]

Example:
    $ palisade identity --identity /etc/palisade/identity.key
    palisade: created /etc/palisade/identity.key (mode 0600); [...]
    12D3KooWQNATWGRydd6BNsAu8WAsHbCXiJhimjACUCQfSuJ5LBXC
`

const dkgUsage = `Usage:
    palisade dkg --members FILE --identity FILE --dir DIR
                 [--phase-timeout D] [--listen ADDRS] [--ceremony-listen ADDRS] [--restart]

Runs this member's side of a distributed key generation (Pedersen DKG over
libp2p, kyber share/dkg/pedersen, t = 2f+1): no machine ever holds the
group secret. Every operator runs it at about the same time with the same
member list file, a JSON object:

    {"name": "acme-locks",
     "members": [{"peer_id": "12D3KooW...", "addrs": ["/ip4/10.0.0.1/tcp/7001"]}, ...],
     "clients": [{"name": "app", "peer_id": "12D3KooW...", "resources": ["*"]}],
     "threshold": 3, "max_epoch_step": 1024}

(threshold and max_epoch_step are optional; threshold must be 2f+1.)
Members listen on their addresses (or --ceremony-listen) on the protocol
/palisade/dkg/fetch/1.0.0 and accept only listed peers. Phases: keys,
deals, responses, complaints, justifications, hash; each has a timeout,
and progress lines on stderr name the members still missing. Members that
stay silent or send bad deals are excluded; the ceremony completes while at most f
misbehave, and fails naming them otherwise. On success DIR is a node
directory exactly as keygen writes one (cluster.json, share.key mode
0600, identity.key, node.json), and stdout ends with the SHA-256 of
cluster.json, identical at every member: compare it out of band.

If the command is interrupted, run it again with the same flags: it
resumes from DIR/dkg-state.json (same ceremony key, same deals) while the
others still run. --restart discards that state instead; then every member
must restart the ceremony.

Flags (environment variable in brackets):
    --members FILE         the member list [PALISADE_MEMBERS]
    --identity FILE        this member's identity key file [PALISADE_IDENTITY]
    --dir DIR              the node directory to write [PALISADE_DIR]
    --phase-timeout D      timeout of each phase, 0 for 60s (0) [PALISADE_PHASE_TIMEOUT]
    --listen A,B           addresses the node binds, written to node.json's
                           listen, apart from the address it announces in
                           the member list (which may be a DNS name); e.g.
                           /ip4/0.0.0.0/tcp/4001 (the announced ones)
                           [PALISADE_LISTEN]
    --ceremony-listen A,B  listen addresses during the ceremony (--listen's,
                           else the member list's) [PALISADE_CEREMONY_LISTEN]
    --restart              discard an interrupted ceremony's state [PALISADE_RESTART]

Example:
    $ palisade dkg --members members.json --identity id.key --dir /var/lib/palisade
    dkg: phase keys: 2/3 answered; still missing: node4 (12D3KooW[...])
    [...]
    cluster acme-locks n=4 t=3 id=[...]
    node2 dir=/var/lib/palisade
    cluster.json sha256 5f0c[...]
    $ palisade node --dir /var/lib/palisade
`

const reshareUsage = `Usage:
    palisade reshare --members FILE --identity FILE --dir DIR
                     (--old-dir DIR | --cluster FILE [--cluster-id ID]) [--phase-timeout D]
                     [--listen ADDRS] [--ceremony-listen ADDRS] [--restart]

Moves the cluster's key to a new member list and threshold (N, t) ->
(N', t') keeping the group public key and the cluster ID, so resources
keep their cluster.json. Old members run it with --old-dir (their current
node directory, whose share they deal); new members with --cluster (the
current cluster.json). Everyone uses the same new member list; its name
must be the cluster's. Old members whose node keeps running meanwhile
must ceremony-listen on another port (ceremony_addrs in the member list).

The new cluster.json raises epoch_floor to the next epoch era (a multiple
of 2^48): new nodes never vote at or below it, so no epoch the old group
certified can be certified again (see docs/design-notes.md). Afterwards
every old member's share file is overwritten and removed (old shares still
sign for the same key); stop the old nodes and start the new directories.

Flags: as for dkg, plus (environment variable in brackets):
    --old-dir DIR     an old member's current node directory [PALISADE_OLD_DIR]
    --cluster FILE    the current cluster.json, for new members [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]

Example:
    $ palisade reshare --members new-members.json --identity id.key \
        --old-dir /var/lib/palisade --dir /var/lib/palisade-2
    [...]
    cluster acme-locks n=7 t=5 id=[...] epoch_floor=281474976710656
    node2 dir=/var/lib/palisade-2
    cluster.json sha256 a41e[...]
`
