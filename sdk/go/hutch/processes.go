package hutch

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// Processes manages background processes: commands that outlive the
// request that started them, whose output is buffered by the server (the
// last 1 MiB per process) so a client can (re)attach to it. Get it from
// Sandbox.Processes. A server without /processes answers 501
// not_supported (IsNotSupported(err) is true).
type Processes struct {
	sb *Sandbox
}

// Signal names accepted by Signal.
const (
	SIGTERM = "SIGTERM"
	SIGKILL = "SIGKILL"
	SIGINT  = "SIGINT"
	SIGHUP  = "SIGHUP"
	SIGQUIT = "SIGQUIT"
)

// ProcessInfo is the state of a background process.
type ProcessInfo struct {
	PID     int      `json:"pid"`
	Cmd     string   `json:"cmd,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	Status  string   `json:"status"` // e.g. "running", "exited"
	Running bool     `json:"running"`
	// ExitCode is nil while the process runs.
	ExitCode  *int      `json:"exit_code"`
	StartedAt time.Time `json:"started_at"`
}

// Process is a handle on one background process.
type Process struct {
	PID int
	ps  *Processes
}

// Start runs cmd (with /bin/sh -c) in the background and returns at once.
func (p *Processes) Start(ctx context.Context, cmd string, opts ExecOptions) (*Process, error) {
	b, err := newExecBody(cmd, nil, opts)
	if err != nil {
		return nil, err
	}
	return p.start(ctx, b)
}

// StartArgv runs argv (no shell) in the background.
func (p *Processes) StartArgv(ctx context.Context, argv []string, opts ExecOptions) (*Process, error) {
	if argv == nil {
		argv = []string{}
	}
	b, err := newExecBody("", argv, opts)
	if err != nil {
		return nil, err
	}
	return p.start(ctx, b)
}

func (p *Processes) start(ctx context.Context, b *execBody) (*Process, error) {
	var resp struct {
		PID int `json:"pid"`
	}
	if err := p.sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(p.sb.ID, "processes"), jsonBody: b}, &resp); err != nil {
		return nil, err
	}
	return &Process{PID: resp.PID, ps: p}, nil
}

// Process returns a handle on the background process pid (no request).
func (p *Processes) Process(pid int) *Process { return &Process{PID: pid, ps: p} }

// List lists the sandbox's background processes.
func (p *Processes) List(ctx context.Context) ([]ProcessInfo, error) {
	var resp struct {
		Items     []ProcessInfo `json:"items"`
		Processes []ProcessInfo `json:"processes"`
	}
	if err := p.sb.c.doJSON(ctx, &request{method: http.MethodGet, path: sandboxPath(p.sb.ID, "processes")}, &resp); err != nil {
		return nil, err
	}
	if resp.Items != nil {
		return resp.Items, nil
	}
	return resp.Processes, nil
}

func pidPath(sb *Sandbox, pid int, rest ...string) string {
	return sandboxPath(sb.ID, append([]string{"processes", strconv.Itoa(pid)}, rest...)...)
}

// Get returns the state of the background process pid.
func (p *Processes) Get(ctx context.Context, pid int) (*ProcessInfo, error) {
	var info ProcessInfo
	if err := p.sb.c.doJSON(ctx, &request{method: http.MethodGet, path: pidPath(p.sb, pid)}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ConnectOptions are the parameters of Connect.
type ConnectOptions struct {
	// From is the output offset to replay from (0: all buffered output).
	From int64
	// OnStdout and OnStderr receive the output, as for ExecStream.
	OnStdout func([]byte)
	OnStderr func([]byte)
}

// Connect (re)attaches to the output of the background process pid:
// buffered output is replayed from opts.From, then followed until the
// process exits. Cancelling ctx detaches without stopping the process.
func (p *Processes) Connect(ctx context.Context, pid int, opts ConnectOptions) (*ExecResult, error) {
	q := url.Values{"from": {strconv.FormatInt(opts.From, 10)}}
	r := &request{method: http.MethodGet, path: pidPath(p.sb, pid, "stream"), query: q,
		header: http.Header{"Accept": {"text/event-stream"}}}
	res, err := p.sb.c.stream(ctx, r, StreamOptions{OnStdout: opts.OnStdout, OnStderr: opts.OnStderr})
	if res != nil {
		res.PID = pid
	}
	return res, err
}

// Wait blocks until the background process pid exits and returns its exit
// status (its output is not collected; use Connect for that).
func (p *Processes) Wait(ctx context.Context, pid int) (*ExecResult, error) {
	return p.Connect(ctx, pid, ConnectOptions{})
}

// SendStdin writes data to the standard input of the background process.
func (p *Processes) SendStdin(ctx context.Context, pid int, data []byte) error {
	body := map[string]string{}
	if utf8.Valid(data) {
		body["text"] = string(data)
	} else {
		body["b64"] = base64.StdEncoding.EncodeToString(data)
	}
	return p.sb.c.doJSON(ctx, &request{method: http.MethodPost, path: pidPath(p.sb, pid, "stdin"), jsonBody: body}, nil)
}

// Signal sends a signal (e.g. SIGTERM, SIGKILL) to the background process.
func (p *Processes) Signal(ctx context.Context, pid int, signal string) error {
	return p.sb.c.doJSON(ctx, &request{method: http.MethodPost, path: pidPath(p.sb, pid, "signal"),
		jsonBody: map[string]string{"signal": signal}, idempotent: true}, nil)
}

// Info returns the process's state.
func (pr *Process) Info(ctx context.Context) (*ProcessInfo, error) { return pr.ps.Get(ctx, pr.PID) }

// Connect attaches to the process's output; see Processes.Connect.
func (pr *Process) Connect(ctx context.Context, opts ConnectOptions) (*ExecResult, error) {
	return pr.ps.Connect(ctx, pr.PID, opts)
}

// Wait blocks until the process exits.
func (pr *Process) Wait(ctx context.Context) (*ExecResult, error) { return pr.ps.Wait(ctx, pr.PID) }

// SendStdin writes to the process's standard input.
func (pr *Process) SendStdin(ctx context.Context, data []byte) error {
	return pr.ps.SendStdin(ctx, pr.PID, data)
}

// Signal sends a signal to the process.
func (pr *Process) Signal(ctx context.Context, signal string) error {
	return pr.ps.Signal(ctx, pr.PID, signal)
}

// Kill sends SIGKILL to the process.
func (pr *Process) Kill(ctx context.Context) error { return pr.ps.Signal(ctx, pr.PID, SIGKILL) }
