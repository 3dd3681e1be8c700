package node

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// The operator endpoints of the admin API (AdminHandler): POST /revoke and
// GET /audit, behind the node's admin secret, and the functions the CLI
// calls them with (RevokeAt, FetchAudit).

// Admin API limits.
const (
	// MaxAuditPage caps the entries of one GET /audit reply.
	MaxAuditPage = 1000
	// maxAdminForm bounds the body of a POST /revoke.
	maxAdminForm = 4 << 10
	// HeaderAuditSequence carries the store's audit counter on GET
	// /audit: the last sequence number it assigned.
	HeaderAuditSequence = "Palisade-Audit-Sequence"
	// adminCallTimeout bounds one admin API call of RevokeAt and
	// FetchAudit when ctx has no deadline.
	adminCallTimeout = 30 * time.Second
)

// ErrAdminAuth reports an admin API call refused for its secret: missing,
// wrong, or the node has none configured.
var ErrAdminAuth = errors.New("node: admin API refused the secret")

// RevokeReply is the JSON answer of POST /revoke.
type RevokeReply struct {
	Node     int    `json:"node"`
	Resource string `json:"resource"`
	Epoch    uint64 `json:"epoch"`
	// HolderID and SessionHash name the holder; the session ID itself is
	// never shown (protocol.SessionHash).
	HolderID    string `json:"holder"`
	SessionHash string `json:"session_hash"`
	Committed   bool   `json:"committed"`
	// LeftMS is what the lease had left at this node, in milliseconds.
	LeftMS int64 `json:"left_ms"`
}

// adminAuth lets a request through only with the admin secret as its
// bearer token.
func (n *Node) adminAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		want := n.cfg.AdminSecret
		if want == "" {
			http.Error(w, "this node has no admin secret configured: operator endpoints are off", http.StatusForbidden)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="palisade node admin"`)
			http.Error(w, "missing or wrong admin secret (the node directory's "+AdminSecretFileName+")", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// serveRevoke is POST /revoke with form fields resource and, optionally,
// epoch (the lease must be at that epoch).
func (n *Node) serveRevoke(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxAdminForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	resource := r.PostForm.Get("resource")
	var epoch uint64
	if s := r.PostForm.Get("epoch"); s != "" {
		e, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			http.Error(w, "bad epoch: "+err.Error(), http.StatusBadRequest)
			return
		}
		epoch = e
	}
	if err := protocol.ValidateResource(resource); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	detail := "operator revoke through the admin API from " + r.RemoteAddr
	rv, err := n.Revoke(r.Context(), resource, epoch, detail)
	switch {
	case errors.Is(err, ErrNoLease):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case errors.Is(err, ErrOtherEpoch):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case errors.Is(err, ErrClosed):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(RevokeReply{
		Node: n.Index(), Resource: rv.Resource, Epoch: rv.Epoch,
		HolderID: rv.Holder.ID, SessionHash: rv.Holder.Session.Hash().String(),
		Committed: rv.Committed, LeftMS: rv.Left.Milliseconds(),
	})
}

// serveAudit is GET /audit?from=N&limit=L: up to L (at most MaxAuditPage)
// audit entries from sequence number N (default 1), one JSON object per
// line, with the store's audit counter in HeaderAuditSequence (entries
// past it, appended while the page was read, wait for the next page).
func (n *Node) serveAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, limit := uint64(1), MaxAuditPage
	if s := q.Get("from"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			http.Error(w, "bad from: "+err.Error(), http.StatusBadRequest)
			return
		}
		from = max(v, 1)
	}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			http.Error(w, "bad limit", http.StatusBadRequest)
			return
		}
		limit = min(v, MaxAuditPage)
	}
	// The counter first, then the entries up to it: a store commits an
	// entry and the counter together, so the page and its counter agree
	// even while the node appends to the log.
	seq, known, err := n.auditSequence(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	entries, err := n.Audit(r.Context(), from, limit)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if known {
		for i, e := range entries {
			if e.Seq > seq {
				entries = entries[:i]
				break
			}
		}
		w.Header().Set(HeaderAuditSequence, strconv.FormatUint(seq, 10))
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			return
		}
	}
}

// auditSequencer is a VoteStore that reports its audit counter (BoltStore
// and MemStore do).
type auditSequencer interface {
	AuditSequence(ctx context.Context) (uint64, error)
}

// auditSequence is the store's audit counter; known is false if the
// store does not say.
func (n *Node) auditSequence(ctx context.Context) (seq uint64, known bool, err error) {
	s, ok := n.ops.raw.(auditSequencer)
	if !ok {
		return 0, false, nil
	}
	seq, err = s.AuditSequence(ctx)
	return seq, err == nil, err
}

// adminURL makes the URL of path on the admin address addr ("host:port"
// or an http:// or https:// URL).
func adminURL(addr, path string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("node: admin address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("node: admin address %q: want HOST:PORT or an http(s) URL", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	return u.String(), nil
}

// adminDo sends one admin API request with the secret and returns the
// response if its status is 200; other statuses become errors (401 and 403
// match ErrAdminAuth, 404 ErrNoLease, 409 ErrOtherEpoch).
func adminDo(ctx context.Context, req *http.Request, secret string) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("node: admin API: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%w: %s: %s", ErrAdminAuth, resp.Status, msg)
	case http.StatusNotFound:
		if strings.Contains(msg, ErrNoLease.Error()) {
			return nil, fmt.Errorf("%w (%s)", ErrNoLease, msg)
		}
	case http.StatusConflict:
		return nil, fmt.Errorf("%w (%s)", ErrOtherEpoch, msg)
	}
	return nil, fmt.Errorf("node: admin API %s: %s: %s", req.URL.Path, resp.Status, msg)
}

// withAdminTimeout bounds ctx by adminCallTimeout unless it has a deadline.
func withAdminTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, adminCallTimeout)
}

// RevokeAt asks the node whose admin API listens on addr to revoke the
// lease on resource (at epoch, if not 0), with the node's admin secret.
// Errors match ErrNoLease, ErrOtherEpoch or ErrAdminAuth where those
// apply.
func RevokeAt(ctx context.Context, addr, secret, resource string, epoch uint64) (RevokeReply, error) {
	ctx, cancel := withAdminTimeout(ctx)
	defer cancel()
	u, err := adminURL(addr, PathRevoke)
	if err != nil {
		return RevokeReply{}, err
	}
	form := url.Values{"resource": {resource}}
	if epoch != 0 {
		form.Set("epoch", strconv.FormatUint(epoch, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return RevokeReply{}, fmt.Errorf("node: revoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := adminDo(ctx, req, secret)
	if err != nil {
		return RevokeReply{}, err
	}
	defer resp.Body.Close()
	var out RevokeReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAdminForm)).Decode(&out); err != nil {
		return RevokeReply{}, fmt.Errorf("node: revoke: reply: %w", err)
	}
	return out, nil
}

// maxAuditLine bounds one line of a GET /audit reply that FetchAudit reads.
const maxAuditLine = 64 << 10

// FetchAudit reads the audit log of the running node whose admin API
// listens on addr, page by page, and calls fn for each entry in sequence
// order, checking the sequence as ReadAudit does (see AuditSummary).
func FetchAudit(ctx context.Context, addr, secret string, fn func(AuditEntry) error) (AuditSummary, error) {
	ctx, cancel := withAdminTimeout(ctx)
	defer cancel()
	base, err := adminURL(addr, PathAudit)
	if err != nil {
		return AuditSummary{}, err
	}
	var chk auditCheck
	var sequence uint64
	for from := uint64(1); ; {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?from=%d&limit=%d", base, from, MaxAuditPage), nil)
		if err != nil {
			return chk.sum, fmt.Errorf("node: audit: %w", err)
		}
		resp, err := adminDo(ctx, req, secret)
		if err != nil {
			return chk.sum, err
		}
		// Each page is consistent with its own counter; the last page's
		// is the log's end.
		hdr, hdrErr := strconv.ParseUint(resp.Header.Get(HeaderAuditSequence), 10, 64)
		got, last, err := readAuditPage(resp.Body, &chk, fn)
		if hdrErr != nil {
			hdr = max(last, sequence) // a node that does not say: what it served
		}
		sequence = hdr
		resp.Body.Close()
		if err != nil {
			return chk.sum, fmt.Errorf("node: audit: %w", err)
		}
		if got < MaxAuditPage {
			break
		}
		if last < from {
			chk.sum.Problems = append(chk.sum.Problems, fmt.Sprintf("the page from entry %d does not advance; stopped there", from))
			break
		}
		from = last + 1
	}
	chk.finish(sequence)
	return chk.sum, nil
}

// readAuditPage reads one GET /audit reply into chk and fn; it returns the
// number of lines and the last sequence number read.
func readAuditPage(r io.Reader, chk *auditCheck, fn func(AuditEntry) error) (lines int, last uint64, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxAuditLine)
	for sc.Scan() {
		lines++
		var e AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			chk.sum.Problems = append(chk.sum.Problems, fmt.Sprintf("line %d of a page does not decode: %v", lines, err))
			continue
		}
		last = e.Seq
		if chk.entry(e.Seq, e) {
			if err := fn(e); err != nil {
				return lines, last, err
			}
		}
	}
	return lines, last, sc.Err()
}
