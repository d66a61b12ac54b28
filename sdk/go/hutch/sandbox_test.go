package hutch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

func TestWrongKeyIsUnauthorized(t *testing.T) {
	t.Parallel()
	liveClient(t) // skip without a server
	c, err := hutch.NewClient(server.URL, "not-the-key")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(testCtx(t, 10*time.Second), hutch.CreateOptions{})
	var apiErr *hutch.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *APIError, got %T %v", err, err)
	}
	if apiErr.Code != "unauthorized" || apiErr.StatusCode != 401 {
		t.Fatalf("got code %q status %d", apiErr.Code, apiErr.StatusCode)
	}
	if apiErr.Retryable() {
		t.Fatal("unauthorized must not be retryable")
	}
	if apiErr.RequestID == "" || apiErr.Message == "" {
		t.Fatalf("missing request id or message: %+v", apiErr)
	}
	if !hutch.IsUnauthorized(err) || hutch.IsNotFound(err) || hutch.IsRetryable(err) {
		t.Fatal("helpers disagree")
	}
	// The listing iterator reports it the same way.
	it := c.List(testCtx(t, 10*time.Second), hutch.ListOptions{})
	if it.Next() || !hutch.IsUnauthorized(it.Err()) {
		t.Fatalf("List with a wrong key: %v", it.Err())
	}
}

func TestCreateGetKillTwice(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 30*time.Second)
	sb, err := c.Create(ctx, hutch.CreateOptions{
		Template: "base", TTL: 90 * time.Second, Env: map[string]string{"GREETING": "hello"},
		Metadata: map[string]string{"team": "sdk"}, CPU: 0.5, MemoryMB: 256, DiskMB: 512,
		Network: &hutch.Network{Mode: hutch.NetworkNone},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.ID == "" || sb.Status != hutch.StatusRunning || sb.Metadata["team"] != "sdk" ||
		sb.CPU != 0.5 || sb.MemoryMB != 256 || sb.DiskMB != 512 || sb.CreatedAt.IsZero() {
		t.Fatalf("unexpected sandbox: %+v", sb.SandboxInfo)
	}
	if d := sb.ExpiresAt.Sub(sb.CreatedAt); d < 85*time.Second || d > 95*time.Second {
		t.Fatalf("ttl: expires %v after creation", d)
	}
	res, err := sb.Exec(ctx, `echo "$GREETING"`, hutch.ExecOptions{})
	if err != nil || res.Stdout != "hello\n" {
		t.Fatalf("env: %v %+v", err, res)
	}

	got, err := c.Get(ctx, sb.ID)
	if err != nil || got.ID != sb.ID || got.Status != hutch.StatusRunning {
		t.Fatalf("Get: %v %+v", err, got)
	}
	info, err := sb.SetTTL(ctx, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(info.ExpiresAt); d < 14*time.Minute || d > 16*time.Minute {
		t.Fatalf("SetTTL: expires in %v", d)
	}
	m, err := sb.Metrics(ctx)
	if err != nil || m.Pids < 1 || m.MemoryBytes <= 0 {
		t.Fatalf("Metrics: %v %+v", err, m)
	}

	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("first Kill: %v", err)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("Close after Kill: %v", err)
	}
	info, err = sb.Info(ctx)
	if err != nil || info.Status != hutch.StatusStopped {
		t.Fatalf("after Kill: %v %+v", err, info)
	}
	_, err = sb.Exec(ctx, "true", hutch.ExecOptions{})
	if !hutch.IsSandboxNotRunning(err) || !hutch.IsConflict(err) {
		t.Fatalf("exec on a stopped sandbox: %v", err)
	}

	// An id never issued.
	err = c.Kill(ctx, "sb_doesnotexist")
	if !hutch.IsNotFound(err) || !hutch.IsSandboxNotFound(err) {
		t.Fatalf("Kill unknown: %v", err)
	}
	if _, err := c.Get(ctx, "sb_doesnotexist"); !hutch.IsSandboxNotFound(err) {
		t.Fatalf("Get unknown: %v", err)
	}
	if err := c.Sandbox("sb_doesnotexist").Close(); err != nil {
		t.Fatalf("Close of an unknown sandbox should be nil: %v", err)
	}
}

func TestCreateErrors(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 10*time.Second)
	_, err := c.Create(ctx, hutch.CreateOptions{Template: "no-such-template"})
	if !hutch.IsNotFound(err) || hutch.ErrorCode(err) != hutch.CodeTemplateNotFound {
		t.Fatalf("unknown template: %v", err)
	}
	_, err = c.Create(ctx, hutch.CreateOptions{Network: &hutch.Network{Mode: "full"}})
	if !hutch.IsInvalidRequest(err) {
		t.Fatalf("network mode full: %v", err)
	}
	_, err = c.Create(ctx, hutch.CreateOptions{MemoryMB: -5})
	if !hutch.IsInvalidRequest(err) {
		t.Fatalf("negative memory: %v", err)
	}
}

func TestCloseWithCancelledContextStillDeletes(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	sb, err := c.Create(ctx, hutch.CreateOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the caller gives up, e.g. its request was aborted

	// Calls with the cancelled context fail with context.Canceled ...
	err = sb.Kill(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Kill with a cancelled ctx: want context.Canceled, got %v", err)
	}
	var ce *hutch.ConnectionError
	if errors.As(err, &ce) {
		t.Fatal("a cancelled context must not look like a connection error")
	}
	check := testCtx(t, 10*time.Second)
	if info, err := sb.Info(check); err != nil || info.Status != hutch.StatusRunning {
		t.Fatalf("sandbox should still run: %v %+v", err, info)
	}
	// ... but the deferred Close uses a fresh context and deletes.
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	info, err := sb.Info(check)
	if err != nil || info.Status != hutch.StatusStopped {
		t.Fatalf("after Close: %v %+v", err, info)
	}
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 30*time.Second)
	tag := randomTag(t)
	want := map[string]bool{}
	for i := 0; i < 7; i++ {
		sb := newSandbox(t, c, hutch.CreateOptions{Metadata: map[string]string{"run": tag}})
		want[sb.ID] = true
	}
	// Item iterator, 3 per page.
	it := c.List(ctx, hutch.ListOptions{Metadata: map[string]string{"run": tag}, Limit: 3})
	seen := map[string]bool{}
	for it.Next() {
		sb := it.Sandbox()
		if seen[sb.ID] {
			t.Fatalf("%s listed twice", sb.ID)
		}
		seen[sb.ID] = true
		if sb.Metadata["run"] != tag {
			t.Fatalf("filter leaked %s %+v", sb.ID, sb.Metadata)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d sandboxes, want %d", len(seen), len(want))
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("%s not listed", id)
		}
	}
	// Page iterator: 7 items at 3 per page → pages of 3, 3, 1.
	pit := c.List(ctx, hutch.ListOptions{Metadata: map[string]string{"run": tag}, Limit: 3, Status: hutch.StatusRunning})
	var sizes []int
	for {
		page, err := pit.NextPage()
		if errors.Is(err, hutch.ErrNoMorePages) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page))
	}
	if len(sizes) != 3 || sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 1 {
		t.Fatalf("page sizes %v", sizes)
	}
	// Status filter: a stopped one drops out of status=running.
	var one string
	for id := range want {
		one = id
		break
	}
	if err := c.Kill(ctx, one); err != nil {
		t.Fatal(err)
	}
	all, err := c.List(ctx, hutch.ListOptions{Metadata: map[string]string{"run": tag}, Status: hutch.StatusRunning}).All()
	if err != nil || len(all) != len(want)-1 {
		t.Fatalf("running after one kill: %v, %d", err, len(all))
	}
}

func TestUnknownSandboxIsNotFound(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 20*time.Second)
	_, err := c.Sandbox("sb_doesnotexist").Processes.List(ctx)
	if !hutch.IsSandboxNotFound(err) {
		t.Fatalf("Processes.List unknown: %v", err)
	}
	var apiErr *hutch.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Retryable() || apiErr.RequestID == "" {
		t.Fatalf("bad error %+v", apiErr)
	}
}

func TestSnapshotAndFork(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 60*time.Second)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	if _, err := sb.Exec(ctx, "echo kept > /home/user/f", hutch.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	snap, err := sb.Snapshot(ctx)
	if err != nil || snap.ID == "" || snap.Memory || snap.SizeBytes == 0 {
		t.Fatalf("Snapshot: %v %+v", err, snap)
	}
	from := newSandbox(t, c, hutch.CreateOptions{Snapshot: snap.ID})
	res, err := from.Exec(ctx, "cat /home/user/f", hutch.ExecOptions{})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("from snapshot: %v %+v", err, res)
	}
	kids, err := sb.Fork(ctx, 2)
	if err != nil || len(kids) != 2 {
		t.Fatalf("Fork: %v %d", err, len(kids))
	}
	for _, k := range kids {
		k := k
		t.Cleanup(func() { _ = k.Kill(context.Background()) })
		res, err := k.Exec(ctx, "cat /home/user/f", hutch.ExecOptions{})
		if err != nil || res.Stdout != "kept\n" {
			t.Fatalf("fork child: %v %+v", err, res)
		}
	}
	if _, err := c.Create(ctx, hutch.CreateOptions{Snapshot: "snap_nope"}); err == nil {
		t.Fatal("create from an unknown snapshot succeeded")
	}
	if _, err := c.Sandbox("sb_doesnotexist").Fork(ctx, 1); !hutch.IsSandboxNotFound(err) {
		t.Fatalf("Fork unknown: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 30*time.Second)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	info, err := sb.Pause(ctx)
	if err != nil || info.Status != hutch.StatusPaused {
		t.Fatalf("Pause: %v %+v", err, info)
	}
	if _, err := sb.Exec(ctx, "true", hutch.ExecOptions{}); !hutch.IsConflict(err) {
		t.Fatalf("exec on a paused sandbox: want conflict, got %v", err)
	}
	info, err = sb.Resume(ctx)
	if err != nil || info.Status != hutch.StatusRunning {
		t.Fatalf("Resume: %v %+v", err, info)
	}
	res, err := sb.Exec(ctx, "echo back", hutch.ExecOptions{})
	if err != nil || res.Stdout != "back\n" {
		t.Fatalf("exec after resume: %v %+v", err, res)
	}
	if _, err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = sb.Exec(ctx, "echo woken", hutch.ExecOptions{AutoResume: true})
	if err != nil || res.Stdout != "woken\n" {
		t.Fatalf("exec with AutoResume: %v %+v", err, res)
	}
	if _, err := c.Sandbox("sb_doesnotexist").Pause(ctx); !hutch.IsSandboxNotFound(err) {
		t.Fatalf("Pause unknown: %v", err)
	}
}
