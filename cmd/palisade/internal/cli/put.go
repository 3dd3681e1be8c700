package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/cmd/palisade/internal/resource"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// PutConfig holds the settings of put (Config.Put).
type PutConfig struct {
	// URL is the base URL of the fenced resource, "palisade resource"
	// (--url). No default; required.
	URL string
	// Every makes put write again every Every while --for lasts; 0
	// writes once (--every). Default 0.
	Every time.Duration
	// For bounds how long put keeps writing with --every, from the
	// acquisition (--for). Default 1m.
	For time.Duration
}

// defaultPutFor is PutConfig.For's default.
const defaultPutFor = time.Minute

// putRequestTimeout bounds one PUT, and the release at the end.
const putRequestTimeout = 10 * time.Second

// errRefusedWrite reports a write the resource did not admit.
var errRefusedWrite = errors.New("the resource refused the write")

func putFlags(fs *flag.FlagSet, c *Config) {
	acquireFlags(fs, c)
	fs.StringVar(&c.Put.URL, "url", c.Put.URL, "")
	fs.DurationVar(&c.Put.Every, "every", c.Put.Every, "")
	fs.DurationVar(&c.Put.For, "for", c.Put.For, "")
}

// runPut acquires RESOURCE and writes VALUE to the fenced resource with
// the token, once or, with --every, again and again while --for lasts.
// The lease is renewed in the background, but put does not stop writing
// when it is lost: like a process paused between its check and its write,
// it leaves its fate to the resource's fence, and stops at the first write
// the resource refuses.
func runPut(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 2 {
		return usageErrorf("put", "put: want RESOURCE and VALUE, got %d arguments", len(args))
	}
	name, value := args[0], args[1]
	for _, f := range [][2]string{{"cluster", cfg.Cluster}, {"identity", cfg.Identity}, {"url", cfg.Put.URL}} {
		if err := requireFlag("put", f[0], f[1]); err != nil {
			return err
		}
	}
	if cfg.Put.Every < 0 || cfg.Put.For < 0 {
		return usageErrorf("put", "put: --every and --for must not be negative")
	}
	if cfg.Put.For == 0 {
		cfg.Put.For = defaultPutFor
	}
	if err := protocol.ValidateResource(name); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	target, err := keyURL(cfg.Put.URL, name)
	if err != nil {
		return usageErrorf("put", "put: --url %q: %v", cfg.Put.URL, err)
	}
	cluster, err := protocol.LoadCluster(cfg.Cluster)
	if err != nil {
		return clusterLoadError("put", cfg.Cluster, err)
	}
	if err := checkLoadedPin("put", cfg, cluster); err != nil {
		return err
	}
	id, err := client.LoadIdentity(cfg.Identity)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	c, err := client.New(client.Config{Cluster: cluster, Identity: id})
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	defer c.Close()
	var lock *client.Lock
	if cfg.Wait > 0 {
		lock, err = acquireWithin(ctx, c, cfg.Wait, name, client.WithTTL(cfg.TTL))
	} else {
		lock, err = c.TryAcquire(ctx, name, client.WithTTL(cfg.TTL))
	}
	if err != nil {
		return fmt.Errorf("put: acquire %q: %w", name, diagnose(ctx, c, name, err))
	}
	start := time.Now()
	tok := lock.Token()
	fmt.Fprintf(e.stdout, "acquired %s epoch=%d token=%s\n", name, tok.Epoch, tok.String())
	err = putLoop(ctx, e.stdout, target, tok, value, cfg.Put.Every, start.Add(cfg.Put.For))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), putRequestTimeout)
	defer cancel()
	if rerr := lock.Release(rctx); rerr != nil && err == nil {
		// Every write went through; the lease only ran out since.
		log.Infow("release failed", "resource", name, "epoch", tok.Epoch, "error", rerr)
	}
	if err != nil {
		return fmt.Errorf("put: %s epoch %d: %w", name, tok.Epoch, err)
	}
	return nil
}

// putLoop writes value with tok to target, then, if every is not 0,
// again every every until until passes. It prints one line per write and
// stops at the first write that is not admitted.
func putLoop(ctx context.Context, out io.Writer, target string, tok protocol.Token, value string, every time.Duration, until time.Time) error {
	for {
		status, msg, err := putOnce(ctx, target, tok, value)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "put %s epoch=%d status=%d\n", tok.Resource, tok.Epoch, status)
		if status/100 != 2 {
			return fmt.Errorf("%w: %d %s: %s", errRefusedWrite, status, http.StatusText(status), msg)
		}
		if every == 0 || time.Now().Add(every).After(until) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// putOnce sends one PUT and returns the status and the first line of the
// answer's body.
func putOnce(ctx context.Context, target string, tok protocol.Token, value string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, putRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, target, strings.NewReader(value))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set(verifier.HeaderToken, tok.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("PUT %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	return resp.StatusCode, msg, nil
}

// keyURL is the URL of resource name's value at the resource base.
func keyURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", errors.New("want http://HOST:PORT")
	}
	return strings.TrimSuffix(base, "/") + resource.PathPrefix + url.PathEscape(name), nil
}

const putUsage = `Usage:
    palisade put --cluster FILE [--cluster-id ID] --identity FILE --url URL [--ttl D] [--wait D]
                 [--every D] [--for D] RESOURCE VALUE

Acquires RESOURCE and writes VALUE to the fenced resource at URL ("palisade
resource": PUT URL/kv/RESOURCE) with the token. It prints
"acquired RESOURCE epoch=E token=T", then "put RESOURCE epoch=E status=S"
for each write. With --every D it writes again every D while --for lasts,
renewing the lease in the background, then releases it and exits 0.

It does not stop writing when its lease is lost: like a process paused
between its check and its write (GC pause, VM freeze), it leaves its fate
to the resource's fence. The first write the resource refuses (409 for a
stale token) ends it with exit status 1. The docker testnet's fault suite
freezes it with "docker pause" to show exactly that.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE   the client's key file, mode 0600 [PALISADE_IDENTITY]
    --url URL         the resource's base URL, http://HOST:PORT [PALISADE_URL]
    --ttl D           lease length, at most 1h (10s) [PALISADE_TTL]
    --wait D          wait up to D to acquire; 0 tries once (0) [PALISADE_WAIT]
    --every D         write again every D; 0 writes once (0) [PALISADE_EVERY]
    --for D           with --every, keep writing this long (1m) [PALISADE_FOR]

Example:
    $ palisade put --url http://127.0.0.1:7070 --ttl 2s --every 500ms orders-db paid
    acquired orders-db epoch=4 token=pt3.A[...]
    put orders-db epoch=4 status=204
    [... the process is paused for 5s; another client takes epoch 5 and writes ...]
    put orders-db epoch=4 status=409
    palisade: error: put: orders-db epoch 4: the resource refused the write: 409 Conflict: [...]
`
