// Package hutch is the Go client of hutch, a self-hosted code-execution
// sandbox server (hutchd).
//
// A Client talks to one hutchd; Client.Create gives a *Sandbox, whose
// methods run commands (Exec, ExecStream), move files (Sandbox.Files) and
// manage the sandbox's life (Kill, Close, SetTTL). Every call takes a
// context.Context: its deadline bounds the call and cancelling it stops the
// call — for an exec, the command is killed inside the sandbox.
//
// Errors answered by the server are *APIError values; use errors.As or the
// helpers IsNotFound, IsNotSupported, IsConflict, ... rather than matching
// strings. A cancelled or expired context surfaces as an error wrapping
// context.Canceled or context.DeadlineExceeded; a broken connection as a
// *ConnectionError.
package hutch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Version is the SDK version sent in the User-Agent header.
const Version = "0.1.0"

// DefaultBaseURL is used when neither the baseURL argument nor HUTCH_URL is set.
const DefaultBaseURL = "http://127.0.0.1:8080"

// DefaultCloseTimeout bounds Sandbox.Close.
const DefaultCloseTimeout = 30 * time.Second

// Client is a hutch API client. It is safe for concurrent use.
type Client struct {
	baseURL      *url.URL
	apiKey       string
	hc           *http.Client
	retry        RetryPolicy
	userAgent    string
	closeTimeout time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc. Do not set
// hc.Timeout: it would cut long execs and streams; use contexts instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithCloseTimeout bounds the fresh context Sandbox.Close deletes with
// (default 30 s).
func WithCloseTimeout(d time.Duration) Option { return func(c *Client) { c.closeTimeout = d } }

// NewClient returns a client of the hutchd at baseURL (e.g.
// "http://127.0.0.1:8080") that authenticates with apiKey. An empty baseURL
// defaults to $HUTCH_URL, then DefaultBaseURL; an empty apiKey to
// $HUTCH_API_KEY.
func NewClient(baseURL, apiKey string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		baseURL = os.Getenv("HUTCH_URL")
	}
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	if apiKey == "" {
		apiKey = os.Getenv("HUTCH_API_KEY")
	}
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("hutch: bad base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("hutch: bad base URL %q: scheme must be http or https", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("hutch: bad base URL %q: no host", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		baseURL:      u,
		apiKey:       apiKey,
		retry:        DefaultRetryPolicy,
		userAgent:    "hutch-go/" + Version,
		closeTimeout: DefaultCloseTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		// No Timeout: deadlines come from each call's context.
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// BaseURL returns the server URL the client talks to.
func (c *Client) BaseURL() string { return c.baseURL.String() }

// request describes one logical API call (possibly sent several times).
type request struct {
	method string
	path   string // e.g. "/v1/sandboxes"
	query  url.Values

	jsonBody interface{} // marshalled once; replayable
	rawBody  []byte      // raw bytes; replayable
	// body is a raw streaming body; not replayable, so never retried.
	body          io.Reader
	contentLength int64 // of body; -1 = unknown (chunked)
	contentType   string

	header http.Header
	// idempotent marks requests safe to send twice (besides GET, HEAD,
	// PUT and DELETE, and requests with an idempotency key).
	idempotent     bool
	idempotencyKey string
}

func (r *request) isIdempotent() bool {
	switch r.method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.idempotent || r.idempotencyKey != ""
}

func (c *Client) url(r *request) string {
	u := *c.baseURL
	u.Path = c.baseURL.Path + r.path
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	return u.String()
}

// do sends r, retrying retryable failures per the client's policy, and
// returns a 2xx response whose body the caller must close. Any other status
// becomes an *APIError.
func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	var payload []byte
	if r.jsonBody != nil {
		b, err := json.Marshal(r.jsonBody)
		if err != nil {
			return nil, fmt.Errorf("hutch: encoding %s %s body: %w", r.method, r.path, err)
		}
		payload = b
	} else if r.rawBody != nil {
		payload = r.rawBody
	}
	replayable := r.body == nil
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, c.ctxError(r, err)
		}
		var bodyReader io.Reader
		switch {
		case payload != nil:
			bodyReader = bytes.NewReader(payload)
		case r.body != nil:
			// Hide any Close method: the caller owns its reader.
			bodyReader = struct{ io.Reader }{r.body}
		}
		var wrote int32
		trace := &httptrace.ClientTrace{
			WroteHeaderField: func(string, []string) { atomic.StoreInt32(&wrote, 1) },
			WroteHeaders:     func() { atomic.StoreInt32(&wrote, 1) },
		}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), r.method, c.url(r), bodyReader)
		if err != nil {
			return nil, fmt.Errorf("hutch: building %s %s: %w", r.method, r.path, err)
		}
		if r.body != nil {
			req.ContentLength = r.contentLength
			if r.contentLength == 0 {
				req.Body = http.NoBody
			}
		}
		for k, vs := range r.header {
			req.Header[k] = vs
		}
		if c.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
		req.Header.Set("User-Agent", c.userAgent)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		} else if r.jsonBody != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.idempotencyKey != "" {
			req.Header.Set("Idempotency-Key", r.idempotencyKey)
		}

		resp, err := c.hc.Do(req)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, c.ctxError(r, cerr)
			}
			connErr := &ConnectionError{Method: r.method, Path: r.path, Err: unwrapURLError(err)}
			sentNothing := atomic.LoadInt32(&wrote) == 0
			if replayable && sentNothing && r.isIdempotent() && attempt < c.retry.attempts() {
				if werr := c.retry.wait(ctx, attempt, 0); werr != nil {
					return nil, c.ctxError(r, werr)
				}
				continue
			}
			return nil, connErr
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		apiErr := readAPIError(resp, r)
		if replayable && attempt < c.retry.attempts() && c.shouldRetryStatus(apiErr, r) {
			if werr := c.retry.wait(ctx, attempt, retryAfter(resp)); werr != nil {
				return nil, c.ctxError(r, werr)
			}
			continue
		}
		return nil, apiErr
	}
}

// shouldRetryStatus: 429 and 503 mean the request was not acted on, so any
// request may be resent; a 500 may have done part of the work, so only
// idempotent requests are resent.
func (c *Client) shouldRetryStatus(e *APIError, r *request) bool {
	if !e.Retryable() {
		return false
	}
	if e.StatusCode == http.StatusInternalServerError || e.Code == CodeInternal {
		return r.isIdempotent()
	}
	return true
}

func (c *Client) ctxError(r *request, err error) error {
	return fmt.Errorf("hutch: %s %s: %w", r.method, r.path, err)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readAPIError consumes and closes resp's body.
func readAPIError(resp *http.Response, r *request) *APIError {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{StatusCode: resp.StatusCode, Method: r.method, Path: r.path}
	var wire struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Code != "" {
		e.Code, e.Message, e.RequestID = wire.Code, wire.Message, wire.RequestID
	} else {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		e.Message = msg
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Request-Id")
	}
	return e
}

// doJSON sends r and decodes a JSON answer into out (if non-nil).
func (c *Client) doJSON(ctx context.Context, r *request, out interface{}) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return c.ctxError(r, cerr)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || isNetError(err) {
			return &ConnectionError{Method: r.method, Path: r.path, Err: err}
		}
		return fmt.Errorf("hutch: %s %s: decoding answer: %w", r.method, r.path, err)
	}
	return nil
}

func isNetError(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne)
}

// newIdempotencyKey returns a random key for one logical create.
func newIdempotencyKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("idk_%d", time.Now().UnixNano())
	}
	return "idk_" + hex.EncodeToString(b[:])
}

func sandboxPath(id string, rest ...string) string {
	p := "/v1/sandboxes/" + url.PathEscape(id)
	for _, s := range rest {
		p += "/" + s
	}
	return p
}
