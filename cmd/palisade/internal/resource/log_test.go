package resource_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/stretchr/testify/require"
)

// logLines captures the JSON log lines of subsystem at info until the
// test ends.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func captureLogs(t *testing.T, subsystem string) *logLines {
	t.Helper()
	require.NoError(t, logging.SetLogLevel(subsystem, "info"))
	pr := logging.NewPipeReader()
	l := &logLines{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["logger"] == subsystem {
				l.mu.Lock()
				l.lines = append(l.lines, m)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		_ = logging.SetLogLevel(subsystem, "error")
		_ = pr.Close()
		<-done
	})
	return l
}

// find returns the lines whose message is msg.
func (l *logLines) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestLogsAdmitAndRefuse: every answered request leaves one info line,
// "admit" or "refuse", with the resource, method, status, and the token's
// epoch; a refusal carries the reason and, when stale, the barrier.
func TestLogsAdmitAndRefuse(t *testing.T) {
	logs := captureLogs(t, "palisade/resource")
	c := newCluster(1, "palisade-test")
	k, _ := server(t, c, t.TempDir(), 64)

	resp, _ := k.do(http.MethodPut, "orders", c.token(t, "orders", 5), "paid")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = k.do(http.MethodPut, "orders", c.token(t, "orders", 4), "late")
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	resp, _ = k.do(http.MethodGet, "orders", "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	var admit, refuse []map[string]any
	require.Eventually(t, func() bool {
		admit, refuse = logs.find("admit"), logs.find("refuse")
		return len(admit) == 1 && len(refuse) == 2
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "orders", admit[0]["resource"])
	require.Equal(t, "PUT", admit[0]["method"])
	require.EqualValues(t, 204, admit[0]["status"])
	require.EqualValues(t, 5, admit[0]["epoch"])
	require.Contains(t, admit[0]["holder"], "client/")

	stale := refuse[0]
	require.EqualValues(t, 409, stale["status"])
	require.EqualValues(t, 4, stale["epoch"])
	require.Equal(t, "5", stale["barrier"])
	require.Contains(t, stale["reason"], "stale")
	missing := refuse[1]
	require.EqualValues(t, 401, missing["status"])
	require.Equal(t, "GET", missing["method"])
	require.Contains(t, missing["reason"], "missing Palisade-Token header")
	require.NotContains(t, missing, "epoch")
}
