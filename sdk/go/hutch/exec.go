package hutch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ExecOptions are the optional parameters of a command.
type ExecOptions struct {
	// Cwd is the working directory (default: the user's home).
	Cwd string
	// Env is added to the command's environment.
	Env map[string]string
	// User runs the command as this user name or uid (default root).
	User string
	// Stdin is fed to the command's standard input.
	Stdin string
	// Timeout kills the command's process group inside the sandbox after
	// this long (rounded up to seconds); the result then has TimedOut set
	// and ExitCode 137. 0 means the server default (60 s); see NoTimeout.
	Timeout time.Duration
	// NoTimeout runs the command without a server-side time limit (the
	// context still bounds it).
	NoTimeout bool
	// AutoResume resumes a paused sandbox instead of failing with a
	// conflict.
	AutoResume bool
}

// StreamOptions are the parameters of ExecStream.
type StreamOptions struct {
	ExecOptions
	// OnStart is called with the command's pid inside the sandbox.
	OnStart func(pid int)
	// OnStdout and OnStderr receive output as it arrives, in chunks of at
	// most 64 KiB, not split at lines. The slice is the callee's to keep.
	// They are called from the goroutine that called ExecStream.
	OnStdout func([]byte)
	OnStderr func([]byte)
	// Detach lets the command run on, its output discarded, when the
	// stream's connection goes away (otherwise it is killed).
	Detach bool
}

// ExecResult is the outcome of a command.
type ExecResult struct {
	// Stdout and Stderr hold the exact bytes of the output (blocking Exec
	// only; ExecStream delivers them through its callbacks).
	Stdout, Stderr string
	// ExitCode is the command's exit status; 128+N when killed by signal N.
	ExitCode int
	// TimedOut is set when the server-side Timeout killed the command.
	TimedOut bool
	// OOMKilled is set when the kernel's OOM killer killed the command.
	OOMKilled bool
	// Truncated is set when blocking Exec dropped output over the server's
	// limits (16 MiB per stream after encoding by default, and a budget
	// shared by all blocking execs); use ExecStream for big outputs.
	// StdoutTruncated and StderrTruncated say which stream was cut: what
	// Stdout / Stderr hold is then a prefix of the output.
	Truncated, StdoutTruncated, StderrTruncated bool
	// StdoutBytes and StderrBytes count every byte the command wrote to
	// each stream, kept or not (blocking Exec only; 0 from servers before
	// these fields).
	StdoutBytes, StderrBytes int64
	// Duration is the command's run time as measured by the server.
	Duration time.Duration
	// PID is the command's pid inside the sandbox (ExecStream only).
	PID int
}

// OK reports whether the command exited with status 0.
func (r *ExecResult) OK() bool { return r.ExitCode == 0 && !r.TimedOut && !r.OOMKilled }

type execBody struct {
	Cmd            string            `json:"cmd,omitempty"`
	Argv           []string          `json:"argv,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	User           string            `json:"user,omitempty"`
	Stdin          string            `json:"stdin,omitempty"`
	TimeoutSeconds *int64            `json:"timeout_seconds,omitempty"`
	Detach         bool              `json:"detach,omitempty"`
	AutoResume     bool              `json:"auto_resume,omitempty"`
}

func newExecBody(cmd string, argv []string, o ExecOptions) (*execBody, error) {
	if argv != nil {
		if len(argv) == 0 || argv[0] == "" {
			return nil, errors.New("hutch: exec: empty argv")
		}
	} else if cmd == "" {
		return nil, errors.New("hutch: exec: empty command")
	}
	b := &execBody{Cmd: cmd, Argv: argv, Cwd: o.Cwd, Env: o.Env, User: o.User, Stdin: o.Stdin,
		AutoResume: o.AutoResume}
	switch {
	case o.NoTimeout:
		zero := int64(0)
		b.TimeoutSeconds = &zero
	case o.Timeout > 0:
		s := ceilSeconds(o.Timeout)
		b.TimeoutSeconds = &s
	}
	return b, nil
}

// Exec runs cmd with /bin/sh -c and waits for it. A command that ran and
// failed is not an error: look at ExitCode. Cancelling ctx (or its
// deadline) kills the command inside the sandbox and returns an error
// wrapping ctx.Err().
func (sb *Sandbox) Exec(ctx context.Context, cmd string, opts ExecOptions) (*ExecResult, error) {
	b, err := newExecBody(cmd, nil, opts)
	if err != nil {
		return nil, err
	}
	return sb.exec(ctx, b)
}

// ExecArgv runs argv without a shell (argv[0] is looked up in PATH).
func (sb *Sandbox) ExecArgv(ctx context.Context, argv []string, opts ExecOptions) (*ExecResult, error) {
	if argv == nil {
		argv = []string{}
	}
	b, err := newExecBody("", argv, opts)
	if err != nil {
		return nil, err
	}
	return sb.exec(ctx, b)
}

func (sb *Sandbox) exec(ctx context.Context, b *execBody) (*ExecResult, error) {
	var wire struct {
		Stdout     string `json:"stdout"`
		Stderr     string `json:"stderr"`
		StdoutB64  string `json:"stdout_b64"`
		StderrB64  string `json:"stderr_b64"`
		ExitCode   int    `json:"exit_code"`
		DurationMS int64  `json:"duration_ms"`
		TimedOut   bool   `json:"timed_out"`
		OOMKilled  bool   `json:"oom_killed"`
		Truncated  bool   `json:"truncated"`
		// Which stream was cut, and the bytes each really had.
		StdoutTruncated bool  `json:"stdout_truncated"`
		StderrTruncated bool  `json:"stderr_truncated"`
		StdoutBytes     int64 `json:"stdout_bytes"`
		StderrBytes     int64 `json:"stderr_bytes"`
	}
	err := sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(sb.ID, "exec"), jsonBody: b}, &wire)
	if err != nil {
		return nil, err
	}
	r := &ExecResult{
		Stdout: wire.Stdout, Stderr: wire.Stderr, ExitCode: wire.ExitCode,
		TimedOut: wire.TimedOut, OOMKilled: wire.OOMKilled, Truncated: wire.Truncated,
		StdoutTruncated: wire.StdoutTruncated, StderrTruncated: wire.StderrTruncated,
		StdoutBytes: wire.StdoutBytes, StderrBytes: wire.StderrBytes,
		Duration: time.Duration(wire.DurationMS) * time.Millisecond,
	}
	// Output that is not text (not UTF-8, or mostly control bytes) comes as
	// base64 of its bytes in stdout_b64 / stderr_b64, the string field "".
	if wire.StdoutB64 != "" {
		raw, err := base64.StdEncoding.DecodeString(wire.StdoutB64)
		if err != nil {
			return nil, fmt.Errorf("hutch: exec: bad stdout_b64: %w", err)
		}
		r.Stdout = string(raw)
	}
	if wire.StderrB64 != "" {
		raw, err := base64.StdEncoding.DecodeString(wire.StderrB64)
		if err != nil {
			return nil, fmt.Errorf("hutch: exec: bad stderr_b64: %w", err)
		}
		r.Stderr = string(raw)
	}
	return r, nil
}

// ExecStream runs cmd with /bin/sh -c, delivering its output to the
// callbacks as it arrives, and returns when it exits. The exit status comes
// from the stream's out-of-band "exit" event; a stream that ends without it
// (sandbox or server died, connection broke) is an error for which
// errors.Is(err, ErrStreamEndedWithoutExit) holds. Cancelling ctx closes the
// connection, which kills the command inside the sandbox (unless Detach),
// and returns an error wrapping ctx.Err().
func (sb *Sandbox) ExecStream(ctx context.Context, cmd string, opts StreamOptions) (*ExecResult, error) {
	b, err := newExecBody(cmd, nil, opts.ExecOptions)
	if err != nil {
		return nil, err
	}
	b.Detach = opts.Detach
	return sb.execStream(ctx, b, opts)
}

// ExecStreamArgv is ExecStream without a shell.
func (sb *Sandbox) ExecStreamArgv(ctx context.Context, argv []string, opts StreamOptions) (*ExecResult, error) {
	if argv == nil {
		argv = []string{}
	}
	b, err := newExecBody("", argv, opts.ExecOptions)
	if err != nil {
		return nil, err
	}
	b.Detach = opts.Detach
	return sb.execStream(ctx, b, opts)
}

func (sb *Sandbox) execStream(ctx context.Context, b *execBody, opts StreamOptions) (*ExecResult, error) {
	r := &request{method: http.MethodPost, path: sandboxPath(sb.ID, "exec", "stream"), jsonBody: b,
		header: http.Header{"Accept": {"text/event-stream"}}}
	return sb.c.stream(ctx, r, opts)
}

// stream sends r and consumes the SSE answer until "exit".
func (c *Client) stream(ctx context.Context, r *request, opts StreamOptions) (*ExecResult, error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res, err := consumeExecEvents(newSSEReader(resp.Body), resp.StatusCode, opts)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, c.ctxError(r, cerr)
		}
		var se *streamEndError
		if errors.As(err, &se) {
			if se.cause != nil && !isAPIError(se.cause) {
				se.cause = &ConnectionError{Method: r.method, Path: r.path, Err: se.cause}
			}
			if api, ok := se.cause.(*APIError); ok {
				api.Method, api.Path = r.method, r.path
			}
		}
		return nil, err
	}
	return res, nil
}

func isAPIError(err error) bool {
	_, ok := err.(*APIError)
	return ok
}

type outputData struct {
	Text *string `json:"text"`
	B64  string  `json:"b64"`
}

func (d *outputData) bytes() ([]byte, error) {
	if d.Text != nil {
		return []byte(*d.Text), nil
	}
	return base64.StdEncoding.DecodeString(d.B64)
}

// consumeExecEvents reads start/stdout/stderr/exit/error events. It returns
// the result at "exit", or a *streamEndError.
func consumeExecEvents(sr *sseReader, status int, opts StreamOptions) (*ExecResult, error) {
	res := &ExecResult{}
	for {
		ev, err := sr.next()
		if err != nil {
			if err == io.EOF {
				return nil, &streamEndError{}
			}
			return nil, &streamEndError{cause: err}
		}
		switch ev.Event {
		case "start":
			var d struct {
				PID int `json:"pid"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("hutch: bad start event: %w", err)
			}
			res.PID = d.PID
			if opts.OnStart != nil {
				opts.OnStart(d.PID)
			}
		case "stdout", "stderr":
			var d outputData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("hutch: bad %s event: %w", ev.Event, err)
			}
			p, err := d.bytes()
			if err != nil {
				return nil, fmt.Errorf("hutch: bad %s event: %w", ev.Event, err)
			}
			if ev.Event == "stdout" && opts.OnStdout != nil {
				opts.OnStdout(p)
			} else if ev.Event == "stderr" && opts.OnStderr != nil {
				opts.OnStderr(p)
			}
		case "exit":
			var d struct {
				ExitCode   int   `json:"exit_code"`
				DurationMS int64 `json:"duration_ms"`
				TimedOut   bool  `json:"timed_out"`
				OOMKilled  bool  `json:"oom_killed"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("hutch: bad exit event: %w", err)
			}
			res.ExitCode, res.TimedOut, res.OOMKilled = d.ExitCode, d.TimedOut, d.OOMKilled
			res.Duration = time.Duration(d.DurationMS) * time.Millisecond
			return res, nil
		case "error":
			var d struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			if d.Code == "" {
				d.Message = string(ev.Data)
			}
			return nil, &streamEndError{cause: &APIError{StatusCode: status, Code: d.Code, Message: d.Message, RequestID: d.RequestID}}
		}
		// Unknown events are ignored (forward compatibility).
	}
}
