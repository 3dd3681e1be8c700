package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminSecretFileName is the file in a node directory that holds the
// bearer secret of the node's admin API (mode 0600). Dir.Start creates
// it on first start. Only the node's operator, who can read the node
// directory, can end a lease (POST /revoke) or read the audit log
// (GET /audit) through the admin API; /metrics, /healthz and /readyz need
// no secret, so a monitoring system can scrape them.
const AdminSecretFileName = "admin.secret"

// adminSecretBytes is the entropy of a new admin secret.
const adminSecretBytes = 32

// maxAdminSecretLen bounds what ReadAdminSecret accepts.
const maxAdminSecretLen = 1024

// Errors of the admin secret.
var (
	// ErrInsecureAdminSecret reports an admin secret file readable by
	// group or others.
	ErrInsecureAdminSecret = errors.New("node: admin secret file is readable by others")
	// ErrBadAdminSecret reports an admin secret file that is empty or too
	// long to be one.
	ErrBadAdminSecret = errors.New("node: admin secret file holds no usable secret")
)

// EnsureAdminSecret returns the admin secret of the node directory dir,
// creating AdminSecretFileName with a random secret (mode 0600) if it does
// not exist yet.
func EnsureAdminSecret(dir string) (string, error) {
	path := filepath.Join(dir, AdminSecretFileName)
	s, err := ReadAdminSecret(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	var b [adminSecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	secret := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return ReadAdminSecret(path) // created meanwhile by another start
	}
	if err != nil {
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	return secret, nil
}

// ReadAdminSecret reads an admin secret file: one line, refused when
// group or others may read it.
func ReadAdminSecret(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s has mode %v, want 0600", ErrInsecureAdminSecret, path, st.Mode().Perm())
	}
	if st.Size() > maxAdminSecretLen {
		return "", fmt.Errorf("%w: %s has %d bytes", ErrBadAdminSecret, path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("node: admin secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return "", fmt.Errorf("%w: %s", ErrBadAdminSecret, path)
	}
	return s, nil
}
