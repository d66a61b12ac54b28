package hutch

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes the server puts in the "code" field of an error response.
// The code is stable and machine-readable; the message is for people.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeUnauthorized        = "unauthorized"
	CodeForbidden           = "forbidden"      // the key's role may not do this (a tenant key on what every key shares)
	CodeQuotaExceeded       = "quota_exceeded" // a tenant key's create past one of its tenant's quotas; not retryable
	CodeSandboxNotFound     = "sandbox_not_found"
	CodeTemplateNotFound    = "template_not_found"
	CodeSnapshotNotFound    = "snapshot_not_found"
	CodeProcessNotFound     = "process_not_found"
	CodeFileNotFound        = "file_not_found"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeConflict            = "conflict"
	CodeSandboxNotRunning   = "sandbox_not_running"
	CodePayloadTooLarge     = "payload_too_large"
	CodeRangeNotSatisfiable = "range_not_satisfiable"
	CodeNotADirectory       = "not_a_directory"
	CodeIsADirectory        = "is_a_directory"
	CodePermissionDenied    = "permission_denied"
	CodeNoSpace             = "no_space"
	CodeHeadersTooLarge     = "headers_too_large"
	CodeRateLimited         = "rate_limited"
	CodeInternal            = "internal"
	CodeNotSupported        = "not_supported"
	CodeCapacityExhausted   = "capacity_exhausted"
	CodeUnavailable         = "unavailable"
)

// APIError is an error answered by the server (any non-2xx status), or an
// "error" event that ended an exec stream. Use errors.As to get at it:
//
//	var apiErr *hutch.APIError
//	if errors.As(err, &apiErr) && apiErr.Code == hutch.CodeSandboxNotFound { ... }
type APIError struct {
	// StatusCode is the HTTP status (200 for an error event inside a stream).
	StatusCode int
	// Code is the server's machine-readable code, e.g. "sandbox_not_found".
	// It is empty when the body was not a hutch error (e.g. a proxy's page).
	Code string
	// Message is a human-readable explanation; it may change between versions.
	Message string
	// RequestID is the server's request id; quote it in bug reports.
	RequestID string
	// Method and Path describe the request that failed.
	Method, Path string
}

func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.StatusCode)
	}
	s := fmt.Sprintf("hutch: %s %s: %d %s", e.Method, e.Path, e.StatusCode, code)
	if e.Method == "" {
		s = fmt.Sprintf("hutch: %d %s", e.StatusCode, code)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Retryable reports whether the same request may succeed if sent again
// later. It is true exactly for the codes rate_limited, capacity_exhausted,
// unavailable and internal; for a response without a hutch code (a proxy in
// between), for statuses 429, 502, 503 and 504.
func (e *APIError) Retryable() bool {
	switch e.Code {
	case CodeRateLimited, CodeCapacityExhausted, CodeUnavailable, CodeInternal:
		return true
	case "":
		switch e.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// ErrStreamEndedWithoutExit is reported (errors.Is) when an exec stream
// ends before its "exit" event: the sandbox, the server or the connection
// died. If the server sent an "error" event, the error also unwraps to an
// *APIError carrying its code.
var ErrStreamEndedWithoutExit = errors.New("hutch: stream ended without an exit event")

// ConnectionError is a transport failure: the server could not be reached,
// or the connection broke. It is distinct from a cancelled or expired
// context, which surfaces as an error wrapping context.Canceled or
// context.DeadlineExceeded.
type ConnectionError struct {
	Method, Path string
	Err          error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("hutch: %s %s: connection error: %v", e.Method, e.Path, e.Err)
}

func (e *ConnectionError) Unwrap() error { return e.Err }

// streamEndError is returned when a stream ends without "exit".
type streamEndError struct {
	cause error // *APIError from an error event, a read error, or nil
}

func (e *streamEndError) Error() string {
	if e.cause == nil {
		return ErrStreamEndedWithoutExit.Error()
	}
	return ErrStreamEndedWithoutExit.Error() + ": " + e.cause.Error()
}

func (e *streamEndError) Unwrap() error { return e.cause }

func (e *streamEndError) Is(target error) bool { return target == ErrStreamEndedWithoutExit }

func asAPIError(err error) (*APIError, bool) {
	var e *APIError
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ErrorCode returns the server's error code carried by err, or "".
func ErrorCode(err error) string {
	if e, ok := asAPIError(err); ok {
		return e.Code
	}
	return ""
}

func hasStatus(err error, status int) bool {
	e, ok := asAPIError(err)
	return ok && e.StatusCode == status
}

func hasCode(err error, code string) bool {
	e, ok := asAPIError(err)
	return ok && e.Code == code
}

// IsNotFound reports whether err is a 404: a sandbox, template, snapshot,
// process or file that does not exist (see ErrorCode for which).
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsSandboxNotFound reports whether err says the sandbox id was never issued
// (or is long gone).
func IsSandboxNotFound(err error) bool { return hasCode(err, CodeSandboxNotFound) }

// IsFileNotFound reports whether err says a path does not exist in the sandbox.
func IsFileNotFound(err error) bool { return hasCode(err, CodeFileNotFound) }

// IsNotSupported reports whether the server does not implement the call yet
// (501 not_supported).
func IsNotSupported(err error) bool { return hasCode(err, CodeNotSupported) }

// IsConflict reports whether err is a 409: conflict (e.g. exec on a paused
// sandbox, non-recursive delete of a non-empty directory) or
// sandbox_not_running.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsSandboxNotRunning reports whether the sandbox is stopped (deleted or
// expired) or failed.
func IsSandboxNotRunning(err error) bool { return hasCode(err, CodeSandboxNotRunning) }

// IsUnauthorized reports whether the API key was missing or wrong.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsInvalidRequest reports whether the server rejected the request as malformed.
func IsInvalidRequest(err error) bool { return hasStatus(err, http.StatusBadRequest) }

// IsCapacityExhausted reports whether the host is at its sandbox limit.
func IsCapacityExhausted(err error) bool { return hasCode(err, CodeCapacityExhausted) }

// IsForbidden reports whether the key's role may not do what was asked
// (403 forbidden).
func IsForbidden(err error) bool { return hasCode(err, CodeForbidden) }

// IsQuotaExceeded reports whether a create was refused because the key's
// tenant is at one of its quotas (403 quota_exceeded); the message names the
// quota and the hutchd flag that sets it.
func IsQuotaExceeded(err error) bool { return hasCode(err, CodeQuotaExceeded) }

// IsRateLimited reports whether the key hit a rate limit.
func IsRateLimited(err error) bool { return hasCode(err, CodeRateLimited) }

// IsRetryable reports whether err is an *APIError whose Retryable() is true
// or a ConnectionError. Errors from a cancelled context are not retryable.
func IsRetryable(err error) bool {
	if e, ok := asAPIError(err); ok {
		return e.Retryable()
	}
	var ce *ConnectionError
	return errors.As(err, &ce)
}
