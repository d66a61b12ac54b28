package hutch

import (
	"context"
	"math/rand"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RetryPolicy says how often and how patiently a request is resent.
//
// A request is resent only when the failure is retryable: an *APIError whose
// Retryable() is true (429 rate_limited and 503 capacity_exhausted /
// unavailable for any request; 500 internal only for idempotent requests),
// or a connection error that happened before any byte of an idempotent
// request was sent. Requests whose body is a caller's io.Reader (streamed
// uploads) are never resent. Waits grow exponentially with jitter; a
// Retry-After header is honoured.
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 disables retries. 0 means 4.
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt (0: 250 ms).
	InitialBackoff time.Duration
	// MaxBackoff caps a single wait (0: 5 s).
	MaxBackoff time.Duration
}

// DefaultRetryPolicy is used unless WithRetryPolicy says otherwise.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 4, InitialBackoff: 250 * time.Millisecond, MaxBackoff: 5 * time.Second}

// NoRetry disables retries.
var NoRetry = RetryPolicy{MaxAttempts: 1}

func (p RetryPolicy) attempts() int {
	if p.MaxAttempts <= 0 {
		return 4
	}
	return p.MaxAttempts
}

var (
	jitterMu  sync.Mutex
	jitterRnd = rand.New(rand.NewSource(time.Now().UnixNano()))
)

// backoff returns the wait after failed attempt n (1-based): exponential,
// capped, with "equal jitter" (between half and all of the step).
func (p RetryPolicy) backoff(n int) time.Duration {
	initial, max := p.InitialBackoff, p.MaxBackoff
	if initial <= 0 {
		initial = 250 * time.Millisecond
	}
	if max <= 0 {
		max = 5 * time.Second
	}
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	jitterMu.Lock()
	j := time.Duration(jitterRnd.Int63n(int64(half) + 1))
	jitterMu.Unlock()
	return half + j
}

// wait sleeps before the next attempt, or returns ctx's error.
func (p RetryPolicy) wait(ctx context.Context, attempt int, retryAfter time.Duration) error {
	d := p.backoff(attempt)
	if retryAfter > d {
		d = retryAfter
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter reads a Retry-After header in seconds (capped at 60 s).
func retryAfter(resp *http.Response) time.Duration {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		if s > 60 {
			s = 60
		}
		return time.Duration(s) * time.Second
	}
	return 0
}
