package hutch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The code interpreter of a sandbox made from the "code-interpreter"
// template: stateful contexts (Python kernels, JavaScript/TypeScript,
// bash) that keep variables and imports between runs. See docs/api.md,
// "Code interpreter".

// OutputLine is text a run printed, with the time the sandbox saw it.
type OutputLine struct {
	Text      string `json:"text"`
	Timestamp string `json:"timestamp,omitempty"`
}

// CodeResult is one result of a run: the value of its last expression
// (IsMainResult) or something it displayed, in every form the kernel gave.
// Image forms (PNG, JPEG) are base64. Chart is a structured description
// of a matplotlib figure (type, title, axis labels, elements); Data a
// DataFrame's columns.
type CodeResult struct {
	IsMainResult bool            `json:"is_main_result"`
	Text         string          `json:"text,omitempty"`
	HTML         string          `json:"html,omitempty"`
	Markdown     string          `json:"markdown,omitempty"`
	SVG          string          `json:"svg,omitempty"`
	PNG          string          `json:"png,omitempty"`
	JPEG         string          `json:"jpeg,omitempty"`
	PDF          string          `json:"pdf,omitempty"`
	LaTeX        string          `json:"latex,omitempty"`
	JavaScript   string          `json:"javascript,omitempty"`
	JSON         json.RawMessage `json:"json,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	Chart        json.RawMessage `json:"chart,omitempty"`
	Extra        json.RawMessage `json:"extra,omitempty"`
}

// CodeError is the error a run raised (Python's exception name and value
// and its traceback), or TimeoutError when CodeOptions.Timeout fired.
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func (e *CodeError) Error() string { return e.Name + ": " + e.Value }

// Execution is what one run gave.
type Execution struct {
	Stdout  []OutputLine
	Stderr  []OutputLine
	Results []CodeResult
	// Error is the run's own error (an exception in the code); nil when
	// the code ran to its end. RunCode's error return is for failures to
	// run at all.
	Error          *CodeError
	ExecutionCount int
	// TimedOut: CodeOptions.Timeout fired and the run was interrupted (the
	// context kept its state).
	TimedOut bool
}

// Text is the main result's text ("" when the last line had no value).
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

// StdoutText joins everything the run printed to stdout.
func (e *Execution) StdoutText() string { return joinLines(e.Stdout) }

// StderrText joins everything the run printed to stderr.
func (e *Execution) StderrText() string { return joinLines(e.Stderr) }

func joinLines(ls []OutputLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Text)
	}
	return b.String()
}

// CodeOptions configure one RunCode.
type CodeOptions struct {
	// Language picks that language's default context: "python" (default),
	// "javascript"/"js", "typescript"/"ts", "bash". Not with ContextID.
	Language string
	// ContextID runs in a context made by CreateCodeContext.
	ContextID string
	// Env holds for this run only.
	Env map[string]string
	// Timeout interrupts the run when it fires (0: none); the context
	// keeps its state and the Execution says TimedOut.
	Timeout time.Duration
	// Called as output and results arrive, before RunCode returns.
	OnStdout func(OutputLine)
	OnStderr func(OutputLine)
	OnResult func(CodeResult)
}

type codeBody struct {
	Code      string            `json:"code"`
	Language  string            `json:"language,omitempty"`
	ContextID string            `json:"context_id,omitempty"`
	EnvVars   map[string]string `json:"env_vars,omitempty"`
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
}

// RunCode runs code in a context of the sandbox's code interpreter and
// waits for it to end, streaming output to the callbacks. Cancelling ctx
// closes the stream, which interrupts the run (the context keeps its
// state). A sandbox without a code interpreter answers an *APIError with
// code "port_unreachable".
func (sb *Sandbox) RunCode(ctx context.Context, code string, opts CodeOptions) (*Execution, error) {
	b := codeBody{Code: code, Language: opts.Language, ContextID: opts.ContextID, EnvVars: opts.Env}
	if opts.Timeout > 0 {
		b.TimeoutMs = opts.Timeout.Milliseconds()
		if b.TimeoutMs == 0 {
			b.TimeoutMs = 1
		}
	}
	r := &request{method: http.MethodPost, path: sandboxPath(sb.ID, "code"), jsonBody: b,
		header: http.Header{"Accept": {"text/event-stream"}}}
	resp, err := sb.c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ex, err := consumeCodeEvents(newSSEReader(resp.Body), opts)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, sb.c.ctxError(r, cerr)
		}
		return nil, &ConnectionError{Method: r.method, Path: r.path, Err: err}
	}
	return ex, nil
}

func consumeCodeEvents(sr *sseReader, opts CodeOptions) (*Execution, error) {
	ex := &Execution{}
	for {
		ev, err := sr.next()
		if err == io.EOF {
			return nil, fmt.Errorf("the run's stream ended without its end event")
		}
		if err != nil {
			return nil, err
		}
		switch ev.Event {
		case "stdout", "stderr":
			var l OutputLine
			if err := json.Unmarshal(ev.Data, &l); err != nil {
				return nil, fmt.Errorf("decoding %s event: %w", ev.Event, err)
			}
			if ev.Event == "stdout" {
				ex.Stdout = append(ex.Stdout, l)
				if opts.OnStdout != nil {
					opts.OnStdout(l)
				}
			} else {
				ex.Stderr = append(ex.Stderr, l)
				if opts.OnStderr != nil {
					opts.OnStderr(l)
				}
			}
		case "result":
			var res CodeResult
			if err := json.Unmarshal(ev.Data, &res); err != nil {
				return nil, fmt.Errorf("decoding result event: %w", err)
			}
			ex.Results = append(ex.Results, res)
			if opts.OnResult != nil {
				opts.OnResult(res)
			}
		case "error":
			var e CodeError
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return nil, fmt.Errorf("decoding error event: %w", err)
			}
			ex.Error = &e
		case "end":
			var end struct {
				ExecutionCount int  `json:"execution_count"`
				TimedOut       bool `json:"timed_out"`
			}
			if err := json.Unmarshal(ev.Data, &end); err != nil {
				return nil, fmt.Errorf("decoding end event: %w", err)
			}
			ex.ExecutionCount, ex.TimedOut = end.ExecutionCount, end.TimedOut
			return ex, nil
		}
	}
}

// CodeContext is one stateful interpreter of the sandbox's code server.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// CreateCodeContext starts a context of language ("" = python) in cwd
// ("" = the template's home directory).
func (sb *Sandbox) CreateCodeContext(ctx context.Context, language, cwd string) (*CodeContext, error) {
	body := map[string]string{}
	if language != "" {
		body["language"] = language
	}
	if cwd != "" {
		body["cwd"] = cwd
	}
	var out CodeContext
	r := &request{method: http.MethodPost, path: sandboxPath(sb.ID, "code", "contexts"), jsonBody: body}
	if err := sb.c.doJSON(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CodeContexts lists the sandbox's contexts (default ones included once
// made).
func (sb *Sandbox) CodeContexts(ctx context.Context) ([]CodeContext, error) {
	var out struct {
		Items []CodeContext `json:"items"`
	}
	r := &request{method: http.MethodGet, path: sandboxPath(sb.ID, "code", "contexts")}
	if err := sb.c.doJSON(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// RestartCodeContext gives the context a fresh interpreter: its state is
// cleared.
func (sb *Sandbox) RestartCodeContext(ctx context.Context, id string) error {
	r := &request{method: http.MethodPost, path: sandboxPath(sb.ID, "code", "contexts", id, "restart"),
		idempotent: true}
	return sb.c.doJSON(ctx, r, nil)
}

// InterruptCodeContext stops the context's running run; its state is kept.
func (sb *Sandbox) InterruptCodeContext(ctx context.Context, id string) error {
	r := &request{method: http.MethodPost, path: sandboxPath(sb.ID, "code", "contexts", id, "interrupt"),
		idempotent: true}
	return sb.c.doJSON(ctx, r, nil)
}

// RemoveCodeContext stops the context and forgets it.
func (sb *Sandbox) RemoveCodeContext(ctx context.Context, id string) error {
	r := &request{method: http.MethodDelete, path: sandboxPath(sb.ID, "code", "contexts", id)}
	return sb.c.doJSON(ctx, r, nil)
}
