// Package transport holds what node and client share about libp2p: a closed host
// (TCP + Noise + yamux, no relay, NAT mapping, mDNS or hole punching), an
// allowlist connection gater on peer IDs, one request/reply exchange over a
// fresh stream with capped frames, and identity key files.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/palisade-dev/palisade/internal/version"
	pproto "github.com/palisade-dev/palisade/protocol"
)

// ErrInsecureKeyFile reports a secret file readable by group or others.
var ErrInsecureKeyFile = errors.New("transport: key file is readable by others")

// Gater admits only peers on its allowlist, at every stage of a connection.
// A refused peer's Connect may still return nil; its NewStream fails.
type Gater struct {
	mu      sync.RWMutex
	allow   map[peer.ID]bool
	blocked map[peer.ID]bool
}

var _ connmgr.ConnectionGater = (*Gater)(nil)

// NewGater returns a gater admitting exactly these peers.
func NewGater(allow ...peer.ID) *Gater {
	g := &Gater{allow: map[peer.ID]bool{}, blocked: map[peer.ID]bool{}}
	for _, p := range allow {
		g.allow[p] = true
	}
	return g
}

// Allow adds a peer to the allowlist.
func (g *Gater) Allow(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allow[p] = true
}

// Block refuses a peer even if allowed (fault injection in tests and
// operator revocation); Unblock undoes it.
func (g *Gater) Block(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked[p] = true
}

// Unblock undoes Block.
func (g *Gater) Unblock(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.blocked, p)
}

// Disallow removes a peer from the allowlist (a client taken out of the
// cluster file); its open connections are the caller's to close.
func (g *Gater) Disallow(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.allow, p)
}

// Allowed reports whether p may connect.
func (g *Gater) Allowed(p peer.ID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.allow[p] && !g.blocked[p]
}

// InterceptPeerDial implements connmgr.ConnectionGater.
func (g *Gater) InterceptPeerDial(p peer.ID) bool { return g.Allowed(p) }

// InterceptAddrDial implements connmgr.ConnectionGater.
func (g *Gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return g.Allowed(p) }

// InterceptAccept implements connmgr.ConnectionGater: the peer is not known
// yet, so it is checked once the handshake is secured.
func (g *Gater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured implements connmgr.ConnectionGater.
func (g *Gater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return g.Allowed(p)
}

// InterceptUpgraded implements connmgr.ConnectionGater.
func (g *Gater) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	return g.Allowed(c.RemotePeer()), 0
}

// AgentPrefix starts the libp2p agent string of every Palisade host; the
// version follows it. Identify sends it to every peer, so "palisade
// status" can show each member's version.
const AgentPrefix = "palisade/"

// Agent is this binary's libp2p agent string: AgentPrefix and the version.
func Agent() string { return AgentPrefix + version.String() }

// NewHost starts a closed libp2p host: the given identity, TCP on the
// listen addresses (none for a pure client), Noise, yamux, the gater, the
// agent string Agent(), and none of libp2p's discovery or relay machinery.
func NewHost(identity crypto.PrivKey, listen []string, gater *Gater) (host.Host, error) {
	opts := []libp2p.Option{
		libp2p.Identity(identity),
		libp2p.UserAgent(Agent()),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ConnectionGater(gater),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
		libp2p.DisableIdentifyAddressDiscovery(),
		libp2p.ForceReachabilityPublic(),
		libp2p.Ping(false),
	}
	rm, err := resourceManager()
	if err != nil {
		return nil, err
	}
	opts = append(opts, libp2p.ResourceManager(rm))
	if len(listen) == 0 {
		opts = append(opts, libp2p.NoListenAddrs)
	} else {
		opts = append(opts, libp2p.ListenAddrStrings(listen...))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("transport: new host: %w", err)
	}
	return h, nil
}

// resourceManager keeps libp2p's default connection, file-descriptor and
// memory limits (which bound pre-authentication handshakes from strangers)
// but lifts its per-scope stream limits: under contention they stalled
// streams here (4 clients x 4 nodes), and streams come only from
// allowlisted peers whose in-flight requests each node bounds itself
// (node.Config.MaxInflightPerPeer).
func resourceManager() (network.ResourceManager, error) {
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	streams := rcmgr.ResourceLimits{Streams: rcmgr.Unlimited, StreamsInbound: rcmgr.Unlimited, StreamsOutbound: rcmgr.Unlimited}
	partial := rcmgr.PartialLimitConfig{
		System: streams, Transient: streams,
		ServiceDefault: streams, ServicePeerDefault: streams,
		ProtocolDefault: streams, ProtocolPeerDefault: streams,
		PeerDefault: streams,
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(partial.Build(scaling.AutoScale())))
	if err != nil {
		return nil, fmt.Errorf("transport: resource manager: %w", err)
	}
	return rm, nil
}

// AddPeer records a member's addresses permanently and protects its
// connection from the connection manager.
func AddPeer(h host.Host, id peer.ID, addrs []string) error {
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return fmt.Errorf("transport: peer %s address %q: %w", id, a, err)
		}
		h.Peerstore().AddAddr(id, m, permanentAddrTTL)
	}
	h.ConnManager().Protect(id, "palisade-member")
	return nil
}

const permanentAddrTTL = time.Duration(1<<63 - 1)

// libp2p's dial backoff is off in every host of this process. After a
// failed dial, a swarm refuses to dial the same address again for 5 s and
// more (swarm.BackoffBase, BackoffCoef), which turns a member's restart
// into seconds of refused requests; we pace our own retries. We used to
// skip it per call with network.WithForceDirectDial, but with that flag a
// dial still queued when its host closes dereferences a nil transport in
// go-libp2p v0.51.0 (Swarm.nonProxyAddr), which crashed a test binary.
// Clearing a peer's backoff before each call instead (e1c59a6) was not
// enough: dials running at once for one peer (the DKG's) still met the
// backoff that a failed one had just left, and resharing failed under
// load. The knobs are package variables of go-libp2p, set once here
// before any host exists.
func init() {
	swarm.BackoffBase, swarm.BackoffCoef = 0, 0
}

// Call sends one request frame on a fresh stream of proto and reads one
// reply frame of at most maxReply bytes (protocol.MaxFrameSize for the
// token plane; the DKG's frames are larger), all within ctx.
func Call(ctx context.Context, h host.Host, p peer.ID, proto string, req []byte, maxReply int) ([]byte, error) {
	s, err := h.NewStream(ctx, p, protocol.ID(proto))
	if err != nil {
		return nil, fmt.Errorf("open %s stream: %w", proto, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := pproto.WriteFrame(s, req); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("send %s: %w", proto, ctxErr(ctx, err))
	}
	if err := s.CloseWrite(); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("send %s: %w", proto, ctxErr(ctx, err))
	}
	reply, err := pproto.ReadFrame(s, maxReply)
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("read %s reply: %w", proto, ctxErr(ctx, err))
	}
	_ = s.Close()
	return reply, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// GenerateIdentity makes a new Ed25519 identity from rand.
func GenerateIdentity(rand io.Reader) (crypto.PrivKey, error) {
	k, _, err := crypto.GenerateEd25519Key(rand)
	if err != nil {
		return nil, fmt.Errorf("transport: generate identity: %w", err)
	}
	return k, nil
}

// SaveIdentity writes a private key file with mode 0600.
func SaveIdentity(path string, k crypto.PrivKey) error {
	b, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		return fmt.Errorf("transport: marshal identity: %w", err)
	}
	return WriteSecret(path, b)
}

// LoadIdentity reads a private key file, refusing one readable by others.
func LoadIdentity(path string) (crypto.PrivKey, error) {
	b, err := ReadSecret(path)
	if err != nil {
		return nil, err
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("transport: identity %s: %w", path, err)
	}
	return k, nil
}

// WriteSecret writes a secret file with mode 0600, refusing to overwrite.
func WriteSecret(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("transport: write secret: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("transport: write secret %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("transport: sync secret %s: %w", path, err)
	}
	return f.Close()
}

// ReadSecret reads a secret file, refusing one whose mode lets group or
// others read it.
func ReadSecret(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("transport: read secret: %w", err)
	}
	if st.Mode().Perm()&fs.FileMode(0o077) != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v, want 0600", ErrInsecureKeyFile, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("transport: read secret: %w", err)
	}
	return b, nil
}

// PeerIDs parses peer ID strings.
func PeerIDs(ss ...string) ([]peer.ID, error) {
	out := make([]peer.ID, len(ss))
	for i, s := range ss {
		id, err := peer.Decode(s)
		if err != nil {
			return nil, fmt.Errorf("transport: peer ID %q: %w", s, err)
		}
		out[i] = id
	}
	return out, nil
}
