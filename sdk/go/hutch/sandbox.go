package hutch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Status is a sandbox's state.
type Status string

const (
	StatusStarting Status = "starting"
	StatusRunning  Status = "running"
	StatusPaused   Status = "paused"
	StatusStopped  Status = "stopped" // deleted or expired
	StatusFailed   Status = "failed"  // its agent died; see Reason
)

// Network modes for CreateOptions.Network. Only NetworkNone is implemented
// by today's server; others answer not_supported.
const (
	NetworkNone = "none"
)

// Network is a sandbox's network policy.
type Network struct {
	Mode string `json:"mode"`
}

// CreateOptions are the parameters of Client.Create. Zero values take the
// server's defaults (template "base", TTL 5 min, 1 CPU, 512 MB memory,
// 2048 MB disk, network "none").
type CreateOptions struct {
	Template string
	// TTL is the backstop that reaps the sandbox if the client dies
	// (rounded up to whole seconds). Renew it with Sandbox.SetTTL.
	TTL time.Duration
	// Env is added to the environment of every command.
	Env      map[string]string
	Metadata map[string]string
	// CPU in cores (fractional allowed).
	CPU      float64
	MemoryMB int
	DiskMB   int
	Network  *Network
	// Snapshot creates the sandbox from a snapshot id instead of a
	// template (needs a server that has snapshots).
	Snapshot string
	// Volumes are mounted into the sandbox (see Client.CreateVolume).
	Volumes []VolumeMount
	// AutoPause pauses the sandbox after this long without a request or
	// an open stream; the next request resumes it (0: never; whole seconds).
	AutoPause time.Duration
	// Vault gives the sandbox credentials it never sees, added to its
	// matching HTTPS requests on their way out (see Vault).
	Vault *Vault
	// IdempotencyKey identifies this logical create across retries. Empty:
	// a random key is generated per Create call.
	IdempotencyKey string
}

type createBody struct {
	Template   string            `json:"template,omitempty"`
	TTLSeconds int64             `json:"ttl_seconds,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	CPU        float64           `json:"cpu,omitempty"`
	MemoryMB   int               `json:"memory_mb,omitempty"`
	DiskMB     int               `json:"disk_mb,omitempty"`
	Network    *Network          `json:"network,omitempty"`
	Snapshot   string            `json:"snapshot,omitempty"`
	Volumes    []VolumeMount     `json:"volumes,omitempty"`
	AutoPause  int64             `json:"auto_pause_seconds,omitempty"`
	Vault      *Vault            `json:"vault,omitempty"`
}

// SandboxInfo is a sandbox's state as last reported by the server.
type SandboxInfo struct {
	ID        string            `json:"id"`
	Template  string            `json:"template"`
	Status    Status            `json:"status"`
	Reason    string            `json:"reason,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	Metadata  map[string]string `json:"metadata"`
	CPU       float64           `json:"cpu"`
	MemoryMB  int               `json:"memory_mb"`
	DiskMB    int               `json:"disk_mb"`
	Driver    string            `json:"driver"`
	Volumes   []VolumeMount     `json:"volumes,omitempty"`
	// PausedBy is "api" or "idle" (the AutoPause policy) while paused.
	PausedBy string `json:"paused_by,omitempty"`
}

// Sandbox is a handle on one sandbox. Its embedded SandboxInfo is a
// snapshot taken when the handle was made; Info fetches a fresh one.
// A Sandbox is safe for concurrent use.
type Sandbox struct {
	SandboxInfo
	// Files moves files in and out of the sandbox.
	Files *Files
	// Processes manages background processes (needs a newer server).
	Processes *Processes

	c *Client
}

func (c *Client) newSandbox(info SandboxInfo) *Sandbox {
	sb := &Sandbox{SandboxInfo: info, c: c}
	sb.Files = &Files{c: c, base: sandboxPath(info.ID, "fs")}
	sb.Processes = &Processes{sb: sb}
	return sb
}

// Sandbox returns a handle on the sandbox id without asking the server
// (only ID is set in its SandboxInfo).
func (c *Client) Sandbox(id string) *Sandbox {
	return c.newSandbox(SandboxInfo{ID: id})
}

// Create starts a sandbox and returns once it can run commands. The request
// carries an Idempotency-Key reused across retries, so a retried create
// never makes a second sandbox (on servers that honour the header).
// Pair it with Close:
//
//	sb, err := client.Create(ctx, hutch.CreateOptions{TTL: 10 * time.Minute})
//	if err != nil { return err }
//	defer sb.Close()
func (c *Client) Create(ctx context.Context, opts CreateOptions) (*Sandbox, error) {
	body := createBody{
		Template:   opts.Template,
		TTLSeconds: ceilSeconds(opts.TTL),
		Env:        opts.Env,
		Metadata:   opts.Metadata,
		CPU:        opts.CPU,
		MemoryMB:   opts.MemoryMB,
		DiskMB:     opts.DiskMB,
		Network:    opts.Network,
		Snapshot:   opts.Snapshot,
		Volumes:    opts.Volumes,
		AutoPause:  ceilSeconds(opts.AutoPause),
		Vault:      opts.Vault,
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = newIdempotencyKey()
	}
	var info SandboxInfo
	err := c.doJSON(ctx, &request{method: http.MethodPost, path: "/v1/sandboxes", jsonBody: body, idempotencyKey: key}, &info)
	if err != nil {
		return nil, err
	}
	return c.newSandbox(info), nil
}

// Get fetches the sandbox id. Stopped sandboxes are reported for an hour
// after they stop; an unknown id is an error for which IsNotFound is true.
func (c *Client) Get(ctx context.Context, id string) (*Sandbox, error) {
	var info SandboxInfo
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sandboxPath(id)}, &info); err != nil {
		return nil, err
	}
	return c.newSandbox(info), nil
}

// Kill deletes the sandbox id: every process is killed and its resources
// are freed before it returns. Deleting an already deleted sandbox succeeds.
func (c *Client) Kill(ctx context.Context, id string) error {
	return c.doJSON(ctx, &request{method: http.MethodDelete, path: sandboxPath(id)}, nil)
}

// ListOptions filter Client.List.
type ListOptions struct {
	// Status keeps only sandboxes in this state (empty: all).
	Status Status
	// Metadata keeps only sandboxes whose metadata has all these pairs.
	Metadata map[string]string
	// Limit is the page size, 1–1000 (0: server default, 50).
	Limit int
	// Cursor starts at a page returned earlier (SandboxIterator.Cursor).
	Cursor string
}

// ErrNoMorePages is returned by SandboxIterator.NextPage after the last page.
var ErrNoMorePages = errors.New("hutch: no more pages")

// SandboxIterator walks the result of Client.List, one page request at a
// time. Use either Next/Sandbox/Err (item by item) or NextPage, not both.
//
//	it := client.List(ctx, hutch.ListOptions{Status: hutch.StatusRunning})
//	for it.Next() {
//		fmt.Println(it.Sandbox().ID)
//	}
//	if err := it.Err(); err != nil { ... }
type SandboxIterator struct {
	c      *Client
	ctx    context.Context
	opts   ListOptions
	cursor string
	done   bool

	page []*Sandbox
	cur  *Sandbox
	err  error
}

// List returns an iterator over the sandboxes matching opts, ordered by id.
// No request is sent until the first Next or NextPage.
func (c *Client) List(ctx context.Context, opts ListOptions) *SandboxIterator {
	return &SandboxIterator{c: c, ctx: ctx, opts: opts, cursor: opts.Cursor}
}

// NextPage fetches the next page. After the last page it returns
// ErrNoMorePages. A page may be empty only when nothing matches.
func (it *SandboxIterator) NextPage() ([]*Sandbox, error) {
	if it.err != nil {
		return nil, it.err
	}
	if it.done {
		return nil, ErrNoMorePages
	}
	q := url.Values{}
	if it.opts.Status != "" {
		q.Set("status", string(it.opts.Status))
	}
	for k, v := range it.opts.Metadata {
		q.Set("metadata."+k, v)
	}
	if it.opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(it.opts.Limit))
	}
	if it.cursor != "" {
		q.Set("cursor", it.cursor)
	}
	var resp struct {
		Items      []SandboxInfo `json:"items"`
		NextCursor *string       `json:"next_cursor"`
	}
	if err := it.c.doJSON(it.ctx, &request{method: http.MethodGet, path: "/v1/sandboxes", query: q}, &resp); err != nil {
		it.err = err
		return nil, err
	}
	if resp.NextCursor == nil || *resp.NextCursor == "" {
		it.done = true
	} else {
		it.cursor = *resp.NextCursor
	}
	page := make([]*Sandbox, len(resp.Items))
	for i, info := range resp.Items {
		page[i] = it.c.newSandbox(info)
	}
	return page, nil
}

// Cursor returns the cursor of the next page ("" when there is none).
func (it *SandboxIterator) Cursor() string {
	if it.done {
		return ""
	}
	return it.cursor
}

// Next advances to the next sandbox, fetching pages as needed. It returns
// false at the end or on an error (see Err).
func (it *SandboxIterator) Next() bool {
	for len(it.page) == 0 {
		page, err := it.NextPage()
		if err != nil {
			it.cur = nil
			return false
		}
		it.page = page
	}
	it.cur, it.page = it.page[0], it.page[1:]
	return true
}

// Sandbox returns the current sandbox of Next.
func (it *SandboxIterator) Sandbox() *Sandbox { return it.cur }

// Err returns the error that stopped Next, if any.
func (it *SandboxIterator) Err() error { return it.err }

// All drains the iterator into a slice.
func (it *SandboxIterator) All() ([]*Sandbox, error) {
	var all []*Sandbox
	for it.Next() {
		all = append(all, it.Sandbox())
	}
	return all, it.Err()
}

// Info fetches the sandbox's current state.
func (sb *Sandbox) Info(ctx context.Context) (*SandboxInfo, error) {
	var info SandboxInfo
	if err := sb.c.doJSON(ctx, &request{method: http.MethodGet, path: sandboxPath(sb.ID)}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Kill deletes the sandbox (idempotent: killing it again succeeds).
func (sb *Sandbox) Kill(ctx context.Context) error { return sb.c.Kill(ctx, sb.ID) }

// Close deletes the sandbox with a fresh context bounded by the client's
// close timeout (30 s by default), so it works even when the caller's
// context is already cancelled — meant for defer. A sandbox that no longer
// exists is not an error.
func (sb *Sandbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), sb.c.closeTimeout)
	defer cancel()
	err := sb.Kill(ctx)
	if IsSandboxNotFound(err) {
		return nil
	}
	return err
}

// SetTTL makes the sandbox expire ttl from now (rounded up to seconds).
func (sb *Sandbox) SetTTL(ctx context.Context, ttl time.Duration) (*SandboxInfo, error) {
	var info SandboxInfo
	body := map[string]int64{"ttl_seconds": ceilSeconds(ttl)}
	err := sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(sb.ID, "ttl"), jsonBody: body, idempotent: true}, &info)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// Pause freezes the sandbox: its processes stop where they are and keep
// their memory; Exec and file calls answer a conflict error until Resume.
// The TTL keeps counting.
func (sb *Sandbox) Pause(ctx context.Context) (*SandboxInfo, error) {
	var info SandboxInfo
	err := sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(sb.ID, "pause"), jsonBody: struct{}{}, idempotent: true}, &info)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// Resume thaws a paused sandbox; its processes continue where they stopped.
func (sb *Sandbox) Resume(ctx context.Context) (*SandboxInfo, error) {
	var info SandboxInfo
	err := sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(sb.ID, "resume"), jsonBody: struct{}{}, idempotent: true}, &info)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// Fork makes count copies of the running sandbox (count < 1 means 1) that
// share its current files copy-on-write; each has its own id, hostname and
// machine-id. Processes are not copied by the jail driver.
func (sb *Sandbox) Fork(ctx context.Context, count int) ([]*Sandbox, error) {
	if count < 1 {
		count = 1
	}
	var resp struct {
		Sandboxes []SandboxInfo `json:"sandboxes"`
	}
	err := sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(sb.ID, "fork"),
		jsonBody: map[string]int{"count": count}, idempotencyKey: newIdempotencyKey()}, &resp)
	if err != nil {
		return nil, err
	}
	out := make([]*Sandbox, len(resp.Sandboxes))
	for i, info := range resp.Sandboxes {
		out[i] = sb.c.newSandbox(info)
	}
	return out, nil
}

// SnapshotInfo describes a snapshot of a sandbox.
type SnapshotInfo struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	SandboxID string    `json:"sandbox_id,omitempty"`
	Template  string    `json:"template,omitempty"`
	CreatedAt time.Time `json:"created_at,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	// Memory is true when the snapshot also holds the processes' memory
	// (a sandbox created from it resumes them); the jail driver keeps
	// files only.
	Memory bool `json:"memory"`
}

// Snapshot saves the sandbox's files (consistently: its processes are
// frozen during the copy); create from it with CreateOptions.Snapshot.
func (sb *Sandbox) Snapshot(ctx context.Context) (*SnapshotInfo, error) {
	var snap SnapshotInfo
	err := sb.c.doJSON(ctx, &request{method: http.MethodPost, path: sandboxPath(sb.ID, "snapshots"),
		jsonBody: struct{}{}, idempotencyKey: newIdempotencyKey()}, &snap)
	if err != nil {
		return nil, err
	}
	return &snap, nil
}

// Metrics are a sandbox's resource usage.
type Metrics struct {
	CPUSeconds      float64       `json:"cpu_seconds"`
	MemoryBytes     int64         `json:"memory_bytes"`
	MemoryPeakBytes int64         `json:"memory_peak_bytes"`
	Pids            int           `json:"pids"`
	OOMKills        int           `json:"oom_kills"`
	UptimeMS        int64         `json:"uptime_ms"`
	Uptime          time.Duration `json:"-"`
}

// Metrics reports the sandbox's resource usage.
func (sb *Sandbox) Metrics(ctx context.Context) (*Metrics, error) {
	var m Metrics
	if err := sb.c.doJSON(ctx, &request{method: http.MethodGet, path: sandboxPath(sb.ID, "metrics")}, &m); err != nil {
		return nil, err
	}
	m.Uptime = time.Duration(m.UptimeMS) * time.Millisecond
	return &m, nil
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
