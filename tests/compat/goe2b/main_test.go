// Package goe2b drives the Go client go-e2b, unmodified, against a live
// hutchd (run.sh starts it): the control plane at hutch's /e2b, envd by
// host name (49983-{id}.{domain}) over Connect with the binary protobuf
// codec. hutchd speaks plain HTTP on loopback, so the client's own
// *http.Client option carries a transport that sends every
// https://{port}-{id}.{domain}/ request to hutchd keeping its Host header:
// no resolver and no /etc/hosts are involved, and nothing leaves the
// machine.
package goe2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	e2b "github.com/matiasinsaurralde/go-e2b"
)

// hostRouter sends requests for {port}-{id}.{domain} to hutchd as plain
// HTTP (Host kept), those for hutchd itself as they are, and refuses any
// other host, so a client that built a wrong URL fails instead of going
// out to the network.
type hostRouter struct {
	addr   string // hutchd's host:port
	domain string
	next   http.RoundTripper
	seen   *mediaTypes // of envd calls, when not nil
}

// mediaTypes records the Content-Type of envd calls and of their answers,
// "request -> answer".
type mediaTypes struct {
	mu    sync.Mutex
	pairs map[string]bool
}

func (m *mediaTypes) add(req, resp string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pairs == nil {
		m.pairs = map[string]bool{}
	}
	m.pairs[req+" -> "+resp] = true
}

func (m *mediaTypes) has(pair string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pairs[pair]
}

func (h *hostRouter) RoundTrip(r *http.Request) (*http.Response, error) {
	host := r.URL.Hostname()
	switch {
	case r.URL.Host == h.addr:
		return h.next.RoundTrip(r)
	case strings.HasSuffix(host, "."+h.domain):
		out := r.Clone(r.Context())
		out.Host = r.URL.Host
		out.URL.Scheme = "http"
		out.URL.Host = h.addr
		resp, err := h.next.RoundTrip(out)
		if err == nil && h.seen != nil {
			h.seen.add(r.Header.Get("Content-Type"), resp.Header.Get("Content-Type"))
		}
		return resp, err
	default:
		return nil, fmt.Errorf("test transport: refusing %s (neither hutchd nor *.%s)", r.URL.Host, h.domain)
	}
}

var (
	hutchAddr string
	apiKey    string
	domain    string
)

func TestMain(m *testing.M) {
	hutchAddr = os.Getenv("HUTCH_ADDR")
	apiKey = os.Getenv("HUTCH_E2B_KEY")
	domain = os.Getenv("HUTCH_DOMAIN")
	if hutchAddr == "" || apiKey == "" || domain == "" {
		fmt.Fprintln(os.Stderr, "HUTCH_ADDR, HUTCH_E2B_KEY and HUTCH_DOMAIN must be set (run.sh sets them)")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// newHTTPClient reaches hutchd for hutchd's address and *.{domain},
// recording envd's media types in seen when it is not nil.
func newHTTPClient(seen *mediaTypes) *http.Client {
	return &http.Client{Transport: &hostRouter{addr: hutchAddr, domain: domain, next: http.DefaultTransport, seen: seen}}
}

// newClient is go-e2b's client pointed at hutchd through its own options;
// sandboxDomain is what the client assumes before a create answers one.
func newClient(t *testing.T, sandboxDomain string) *e2b.Client {
	return newRecordingClient(t, sandboxDomain, nil)
}

func newRecordingClient(t *testing.T, sandboxDomain string, seen *mediaTypes) *e2b.Client {
	t.Helper()
	c, err := e2b.NewClient(e2b.ClientConfig{
		APIKey:        apiKey,
		APIBaseURL:    "http://" + hutchAddr + "/e2b",
		SandboxDomain: sandboxDomain,
		HTTPClient:    newHTTPClient(seen),
	})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// newSandbox creates a base sandbox that is killed when the test ends.
func newSandbox(t *testing.T, c *e2b.Client) *e2b.Sandbox {
	t.Helper()
	sb, err := c.NewSandbox(testContext(t), e2b.SandboxConfig{Template: "base", Timeout: 300})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

// testContext is bounded so that a hung call fails the test rather than
// the whole run.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// skipMissing marks a flow that needs an E2B feature hutch does not have
// yet: the test stays, and says what hutch answered.
func skipMissing(t *testing.T, feature string, err error) {
	t.Helper()
	t.Skipf("needs E2B %s, which hutch does not serve yet: %v", feature, err)
}

func isNotFound(err error) bool {
	var nf *e2b.SandboxNotFoundError
	return errors.As(err, &nf)
}
