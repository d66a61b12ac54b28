package hutch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

var fastRetry = hutch.WithRetryPolicy(hutch.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})

const sandboxJSON = `{"id":"sb_1","template":"base","status":"running","created_at":"2026-01-01T00:00:00Z","expires_at":"2026-01-01T00:05:00Z","metadata":{},"cpu":1.0,"memory_mb":512,"disk_mb":2048,"driver":"jail"}`

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "r_test")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"code":%q,"message":"test says %s","request_id":"r_test","retryable":%v}`, code, code,
		code == "unavailable" || code == "capacity_exhausted" || code == "internal" || code == "rate_limited")
}

func TestRetryCreateReusesIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodies = append(bodies, string(b))
		n := len(keys)
		mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/sandboxes" || r.Header.Get("Authorization") != "Bearer k" {
			writeError(w, 400, "invalid_request")
			return
		}
		if n <= 2 {
			writeError(w, 503, "capacity_exhausted")
			return
		}
		w.WriteHeader(201)
		io.WriteString(w, sandboxJSON)
	}))
	defer srv.Close()
	c, err := hutch.NewClient(srv.URL, "k", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(context.Background(), hutch.CreateOptions{Template: "base", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != "sb_1" {
		t.Fatalf("got %+v", sb.SandboxInfo)
	}
	if len(keys) != 3 {
		t.Fatalf("%d attempts, want 3", len(keys))
	}
	if keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("Idempotency-Key not reused across retries: %q", keys)
	}
	if bodies[0] != bodies[2] || !strings.Contains(bodies[0], `"ttl_seconds":10`) {
		t.Fatalf("bodies differ or wrong: %q", bodies)
	}
	// A second logical create gets a new key.
	if _, err := c.Create(context.Background(), hutch.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if keys[3] == keys[0] {
		t.Fatal("two logical creates share an Idempotency-Key")
	}
	// A caller-chosen key is sent as is.
	if _, err := c.Create(context.Background(), hutch.CreateOptions{IdempotencyKey: "mine"}); err != nil {
		t.Fatal(err)
	}
	if keys[4] != "mine" {
		t.Fatalf("key %q", keys[4])
	}
}

func TestNoRetryOn400(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&n, 1)
		writeError(w, 400, "invalid_request")
	}))
	defer srv.Close()
	c, _ := hutch.NewClient(srv.URL, "k", fastRetry)
	_, err := c.Create(context.Background(), hutch.CreateOptions{})
	var apiErr *hutch.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "invalid_request" || apiErr.Retryable() {
		t.Fatalf("got %v", err)
	}
	if apiErr.RequestID != "r_test" || apiErr.Message != "test says invalid_request" {
		t.Fatalf("fields: %+v", apiErr)
	}
	if got := atomic.LoadInt32(&n); got != 1 {
		t.Fatalf("400 sent %d times, want 1", got)
	}
}

// A tenant's quota does not clear by waiting: 403 quota_exceeded (and
// forbidden) are answered once, and the helpers tell them apart.
func TestNoRetryOnQuotaExceededOrForbidden(t *testing.T) {
	for _, code := range []string{hutch.CodeQuotaExceeded, hutch.CodeForbidden} {
		var n int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			atomic.AddInt32(&n, 1)
			writeError(w, 403, code)
		}))
		c, _ := hutch.NewClient(srv.URL, "k", fastRetry)
		_, err := c.Create(context.Background(), hutch.CreateOptions{})
		srv.Close()
		if hutch.ErrorCode(err) != code || hutch.IsRetryable(err) {
			t.Fatalf("%s: got %v", code, err)
		}
		if hutch.IsQuotaExceeded(err) != (code == hutch.CodeQuotaExceeded) ||
			hutch.IsForbidden(err) != (code == hutch.CodeForbidden) {
			t.Fatalf("%s: IsQuotaExceeded %v, IsForbidden %v", code, hutch.IsQuotaExceeded(err), hutch.IsForbidden(err))
		}
		if got := atomic.LoadInt32(&n); got != 1 {
			t.Fatalf("%s sent %d times, want 1", code, got)
		}
	}
}

func TestRetryGivesUpAfterMaxAttempts(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&n, 1)
		writeError(w, 503, "unavailable")
	}))
	defer srv.Close()
	c, _ := hutch.NewClient(srv.URL, "k", fastRetry)
	_, err := c.Get(context.Background(), "sb_1")
	if !hutch.IsRetryable(err) || hutch.ErrorCode(err) != "unavailable" {
		t.Fatalf("got %v", err)
	}
	if got := atomic.LoadInt32(&n); got != 4 {
		t.Fatalf("%d attempts, want 4", got)
	}
}

func TestInternalRetriedOnlyWhenIdempotent(t *testing.T) {
	var gets, execs int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			if atomic.AddInt32(&gets, 1) == 1 {
				writeError(w, 500, "internal")
				return
			}
			io.WriteString(w, sandboxJSON)
			return
		}
		atomic.AddInt32(&execs, 1)
		writeError(w, 500, "internal")
	}))
	defer srv.Close()
	c, _ := hutch.NewClient(srv.URL, "k", fastRetry)
	if _, err := c.Get(context.Background(), "sb_1"); err != nil {
		t.Fatalf("GET after one 500: %v", err)
	}
	_, err := c.Sandbox("sb_1").Exec(context.Background(), "echo once", hutch.ExecOptions{})
	if hutch.ErrorCode(err) != "internal" {
		t.Fatalf("got %v", err)
	}
	if execs != 1 {
		t.Fatalf("a non-idempotent exec was sent %d times after a 500", execs)
	}
}

func TestNonHutchErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(502)
		io.WriteString(w, "<html>bad gateway</html>")
	}))
	defer srv.Close()
	c, _ := hutch.NewClient(srv.URL, "k", hutch.WithRetryPolicy(hutch.NoRetry))
	_, err := c.Get(context.Background(), "sb_1")
	var apiErr *hutch.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Code != "" || !apiErr.Retryable() ||
		!strings.Contains(apiErr.Message, "bad gateway") {
		t.Fatalf("got %#v", err)
	}
}

// flakyTransport fails the first n round trips before writing anything.
type flakyTransport struct {
	n     int32
	calls int32
	next  http.RoundTripper
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if atomic.AddInt32(&f.calls, 1) <= f.n {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return f.next.RoundTrip(r)
}

func TestConnectionErrorRetry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(w, sandboxJSON)
			return
		}
		io.WriteString(w, `{"stdout":"","stderr":"","exit_code":0,"duration_ms":1}`)
	}))
	defer srv.Close()

	// GET: idempotent, nothing was sent → retried.
	ft := &flakyTransport{n: 2, next: http.DefaultTransport}
	c, _ := hutch.NewClient(srv.URL, "k", fastRetry, hutch.WithHTTPClient(&http.Client{Transport: ft}))
	if _, err := c.Get(context.Background(), "sb_1"); err != nil {
		t.Fatalf("GET: %v", err)
	}
	if ft.calls != 3 {
		t.Fatalf("GET made %d round trips, want 3", ft.calls)
	}
	// Exec: not idempotent → the connection error is returned as is.
	ft = &flakyTransport{n: 1, next: http.DefaultTransport}
	c, _ = hutch.NewClient(srv.URL, "k", fastRetry, hutch.WithHTTPClient(&http.Client{Transport: ft}))
	_, err := c.Sandbox("sb_1").Exec(context.Background(), "true", hutch.ExecOptions{})
	var ce *hutch.ConnectionError
	if !errors.As(err, &ce) || errors.Is(err, context.Canceled) || hutch.IsNotFound(err) {
		t.Fatalf("want *ConnectionError, got %T %v", err, err)
	}
	if ft.calls != 1 {
		t.Fatalf("exec made %d round trips, want 1", ft.calls)
	}
}

func TestConnectionRefusedIsConnectionError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, _ := hutch.NewClient("http://"+addr, "k", fastRetry)
	_, err = c.Get(context.Background(), "sb_1")
	var ce *hutch.ConnectionError
	if !errors.As(err, &ce) || !hutch.IsRetryable(err) {
		t.Fatalf("got %T %v", err, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a refused connection looks like a context error")
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 503, "unavailable")
	}))
	defer srv.Close()
	c, _ := hutch.NewClient(srv.URL, "k", hutch.WithRetryPolicy(hutch.RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Minute, MaxBackoff: time.Minute}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Get(ctx, "sb_1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the backoff ignored the context")
	}
}

func TestRetryAfterHeader(t *testing.T) {
	var n int32
	var first time.Time
	var gap time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&n, 1) == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			writeError(w, 429, "rate_limited")
			return
		}
		gap = time.Since(first)
		io.WriteString(w, sandboxJSON)
	}))
	defer srv.Close()
	c, _ := hutch.NewClient(srv.URL, "k", fastRetry)
	if _, err := c.Get(context.Background(), "sb_1"); err != nil {
		t.Fatal(err)
	}
	if gap < 900*time.Millisecond {
		t.Fatalf("Retry-After ignored: retried after %v", gap)
	}
}

func TestClientDefaultsFromEnv(t *testing.T) {
	t.Setenv("HUTCH_URL", "http://10.1.2.3:9999/")
	t.Setenv("HUTCH_API_KEY", "envkey")
	c, err := hutch.NewClient("", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "http://10.1.2.3:9999" {
		t.Fatalf("base %q", c.BaseURL())
	}
	if _, err := hutch.NewClient("ftp://x", ""); err == nil {
		t.Fatal("ftp URL accepted")
	}
	// Key from the environment is sent.
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		io.WriteString(w, sandboxJSON)
	}))
	defer srv.Close()
	c, _ = hutch.NewClient(srv.URL, "")
	if _, err := c.Get(context.Background(), "sb_1"); err != nil || got != "Bearer envkey" {
		t.Fatalf("%v %q", err, got)
	}
}
