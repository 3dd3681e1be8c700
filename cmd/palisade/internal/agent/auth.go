package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
)

// Secret limits: a bearer secret is 16 to 4096 bytes once surrounding
// white space is trimmed (e.g. "openssl rand -hex 32 > FILE").
const (
	MinSecretLen = 16
	MaxSecretLen = 4096
)

// LoadSecret reads a bearer secret from path. It refuses a file that group
// or others may read (ErrInsecureSecret; chmod 600 it), and content that is
// shorter than MinSecretLen or longer than MaxSecretLen once surrounding
// white space is trimmed (ErrBadSecret).
func LoadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agent: secret: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("agent: secret: %w", err)
	}
	if st.Mode().Perm()&fs.FileMode(0o077) != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v, want 0600", ErrInsecureSecret, path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 2*MaxSecretLen+1))
	if err != nil {
		return nil, fmt.Errorf("agent: secret: %w", err)
	}
	s := []byte(strings.TrimSpace(string(b)))
	if err := checkSecret(s); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return s, nil
}

func checkSecret(s []byte) error {
	if len(s) < MinSecretLen || len(s) > MaxSecretLen {
		return fmt.Errorf("%w: %d bytes, want %d to %d", ErrBadSecret, len(s), MinSecretLen, MaxSecretLen)
	}
	return nil
}

// CheckListen refuses (ErrInsecureListen) an address that is not
// loopback when the agent has no secret. An unspecified address
// (0.0.0.0, ::) listens everywhere, so it is not loopback.
func CheckListen(addr net.Addr, haveSecret bool) error {
	if haveSecret {
		return nil
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return fmt.Errorf("%w: %s", ErrInsecureListen, addr)
	}
	return nil
}

// CheckListenAddr is CheckListen for an address not yet listened on
// ("HOST:PORT"), so a bad one is refused before anything binds it: an
// empty host or a non-loopback IP is refused without a secret. A host
// name other than localhost passes; check the listener's address with
// CheckListen once it is bound.
func CheckListenAddr(hostport string, haveSecret bool) error {
	if haveSecret {
		return nil
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("agent: listen address %q: %w", hostport, err)
	}
	if host == "" {
		return fmt.Errorf("%w: %s listens on every interface", ErrInsecureListen, hostport)
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() {
		return fmt.Errorf("%w: %s", ErrInsecureListen, hostport)
	}
	return nil
}

// guard checks every request before it is routed: no browser requests;
// with a secret, the bearer secret (the current one: see SetSecret);
// without one, a loopback host name (a DNS-rebinding page names its own
// host).
func (a *Agent) guard(next http.Handler) http.Handler {
	deny := func(w http.ResponseWriter, e *apiError) {
		a.metrics.denied.WithLabelValues(string(e.Code)).Inc()
		writeError(w, e)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			deny(w, &apiError{Code: CodeForbidden, Message: "requests from browsers (with an Origin header) are not served"})
			return
		}
		want := a.secret.Load()
		if want == nil {
			if !loopbackHost(r.Host) {
				deny(w, &apiError{Code: CodeForbidden, Message: fmt.Sprintf("host %q is not loopback; an agent without a secret serves only 127.0.0.1, ::1 and localhost", truncate(r.Host, 64))})
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		// Compare digests: equal length, so the time taken says nothing
		// about the secret, not even its length.
		if sum := sha256.Sum256([]byte(got)); !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="palisade-agent"`)
			deny(w, &apiError{Code: CodeUnauthorised, Message: "missing or wrong bearer secret (Authorization: Bearer SECRET)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SetSecret replaces the bearer secret every request must carry (as
// "palisade agent" does on SIGHUP, from --secret-file): requests with the
// old secret are refused from then on, and held locks are kept. It
// refuses (ErrBadSecret) a secret of the wrong length, and
// (ErrNoSecret) an agent made without a secret, which serves loopback
// only and would change its security model.
func (a *Agent) SetSecret(secret []byte) error {
	if a.secret.Load() == nil {
		return ErrNoSecret
	}
	if err := checkSecret(secret); err != nil {
		return err
	}
	digest := sha256.Sum256(secret)
	a.secret.Store(&digest)
	return nil
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost or a loopback IP, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
