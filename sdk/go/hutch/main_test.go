package hutch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
	"github.com/hutch-sandbox/hutch/sdk/go/internal/testserver"
)

// server is the hutchd shared by every live test of this package run; nil
// when HUTCHD_BIN is unset (live tests skip).
var server *testserver.Server

func TestMain(m *testing.M) {
	s, err := testserver.Start()
	switch {
	case errors.Is(err, testserver.ErrNotConfigured):
		fmt.Fprintln(os.Stderr, err)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	default:
		server = s
	}
	code := m.Run()
	if server != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "--- hutchd log (tail) ---\n%s\n", server.Log())
		}
		if err := server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// liveClient returns a client of the test server, or skips.
func liveClient(t *testing.T) *hutch.Client {
	t.Helper()
	if server == nil {
		t.Skip("HUTCHD_BIN not set: no live hutchd")
	}
	c, err := hutch.NewClient(server.URL, server.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testCtx is a context bounded well under the go test timeout.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newSandbox creates a sandbox deleted at the end of the test.
func newSandbox(t *testing.T, c *hutch.Client, opts hutch.CreateOptions) *hutch.Sandbox {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = 2 * time.Minute
	}
	sb, err := c.Create(testCtx(t, 30*time.Second), opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// waitNoProcess polls `ps -eo comm` in the sandbox until no process named
// comm is left, failing if one is still there after within.
func waitNoProcess(t *testing.T, sb *hutch.Sandbox, comm string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		res, err := sb.Exec(testCtx(t, 10*time.Second), "ps -eo comm", hutch.ExecOptions{})
		if err != nil {
			t.Fatalf("ps: %v", err)
		}
		found := false
		for _, line := range strings.Split(res.Stdout, "\n") {
			if strings.TrimSpace(line) == comm {
				found = true
			}
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a %q process is still running in the sandbox %v after the cancel:\n%s", comm, within, res.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitProcess polls until a process named comm runs in the sandbox.
func waitProcess(t *testing.T, sb *hutch.Sandbox, comm string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		res, err := sb.Exec(testCtx(t, 10*time.Second), "ps -eo comm", hutch.ExecOptions{})
		if err != nil {
			t.Fatalf("ps: %v", err)
		}
		for _, line := range strings.Split(res.Stdout, "\n") {
			if strings.TrimSpace(line) == comm {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q process showed up in the sandbox", comm)
}

func randomTag(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
}
