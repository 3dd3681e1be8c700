package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/palisade-dev/palisade/testnet"
)

// etcdMembers is the size of the etcd cluster: 3, what a user deploys
// for a lock service that survives one crash.
const etcdMembers = 3

// etcdStartTimeout bounds the start of the etcd cluster (leader elected,
// every member ready).
const etcdStartTimeout = time.Minute

// etcdCluster is a 3-member etcd cluster in this process, on loopback,
// durable: each member has its own data directory and fsyncs its WAL
// (etcd's default; UnsafeNoFsync stays off).
type etcdCluster struct {
	members   []*embed.Etcd
	endpoints []string
	// level is the members' log level: errors while they run, nothing
	// once Close begins (stopping servers logs their "closed" errors).
	level zap.AtomicLevel
}

// startEtcd starts the cluster with its members' data under dir.
func startEtcd(ctx context.Context, dir string) (*etcdCluster, error) {
	ports, err := testnet.FreePorts(2 * etcdMembers)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	loopback := func(port int) url.URL { return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)} }
	var initial []string
	for i := range etcdMembers {
		peerURL := loopback(ports[2*i])
		initial = append(initial, fmt.Sprintf("m%d=%s", i+1, peerURL.String()))
	}
	c := &etcdCluster{level: zap.NewAtomicLevelAt(zap.ErrorLevel)}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = c.level
	lg, err := zcfg.Build()
	if err != nil {
		return nil, fmt.Errorf("etcd: logger: %w", err)
	}
	for i := range etcdMembers {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i+1)
		cfg.Dir = filepath.Join(dir, cfg.Name)
		peerURL, clientURL := loopback(ports[2*i]), loopback(ports[2*i+1])
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "palisade-bench"
		cfg.ClusterState = embed.ClusterStateFlagNew
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg.Named(cfg.Name))
		cfg.UnsafeNoFsync = false // durable, like Palisade's votes
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("etcd: start %s: %w", cfg.Name, err), c.Close())
		}
		c.members = append(c.members, e)
		c.endpoints = append(c.endpoints, clientURL.String())
	}
	timeout := time.NewTimer(etcdStartTimeout)
	defer timeout.Stop()
	for _, e := range c.members {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			return nil, errors.Join(fmt.Errorf("etcd: %w", err), c.Close())
		case <-timeout.C:
			return nil, errors.Join(errors.New("etcd: cluster not ready in time"), c.Close())
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), c.Close())
		}
	}
	return c, nil
}

// Close stops every member.
func (c *etcdCluster) Close() error {
	c.level.SetLevel(zap.FatalLevel)
	for _, e := range c.members {
		e.Close()
	}
	c.members = nil
	return nil
}

// newLocker returns a Locker with its own etcd client (all members as
// endpoints, as an application would configure it) and its own session.
func (c *etcdCluster) newLocker() (testnet.Locker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd: client: %w", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(testnet.BenchTTL/time.Second)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("etcd: session: %w", err), cli.Close())
	}
	return &etcdLocker{cli: cli, s: s}, nil
}

// etcdLocker is the etcd Locker: one client, one session, and a
// concurrency.Mutex per lock. The fencing token is the revision of the
// response that granted the lock (Mutex.Header().Revision).
type etcdLocker struct {
	cli *clientv3.Client
	s   *concurrency.Session
	m   *concurrency.Mutex
}

func (l *etcdLocker) Lock(ctx context.Context, resource string) (uint64, error) {
	m := concurrency.NewMutex(l.s, "/palisade-bench/"+resource)
	if err := m.Lock(ctx); err != nil {
		return 0, fmt.Errorf("etcd: lock %s: %w", resource, err)
	}
	l.m = m
	return uint64(m.Header().Revision), nil
}

func (l *etcdLocker) Unlock(ctx context.Context) error {
	if l.m == nil {
		return errors.New("etcd: unlock without a lock")
	}
	m := l.m
	l.m = nil
	return m.Unlock(ctx)
}

func (l *etcdLocker) Close() error {
	return errors.Join(l.s.Close(), l.cli.Close())
}
