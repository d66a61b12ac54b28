package goe2b

import (
	"testing"
	"time"

	e2b "github.com/matiasinsaurralde/go-e2b"
)

func TestLifecycleCreateInfoListKill(t *testing.T) {
	c := newClient(t, domain)
	ctx := testContext(t)
	sb, err := c.NewSandbox(ctx, e2b.SandboxConfig{Template: "base", Metadata: map[string]string{"suite": "goe2b"}})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	info, err := sb.InfoWithContext(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.ID != sb.ID || info.Template != "base" || info.State != "running" {
		t.Fatalf("Info = %+v, want sandbox %s of base, running", info, sb.ID)
	}
	if info.Metadata["suite"] != "goe2b" {
		t.Fatalf("Info metadata = %v", info.Metadata)
	}
	list, err := c.ListSandboxes(ctx)
	if err != nil {
		t.Fatalf("ListSandboxes: %v", err)
	}
	if !containsSandbox(list, sb.ID) {
		t.Fatalf("ListSandboxes lacks %s", sb.ID)
	}
	v2, err := c.ListSandboxesV2(ctx, e2b.WithSandboxState("running"), e2b.WithSandboxMetadata(map[string]string{"suite": "goe2b"}))
	if err != nil {
		t.Fatalf("ListSandboxesV2: %v", err)
	}
	if !containsSandbox(v2.Sandboxes, sb.ID) {
		t.Fatalf("ListSandboxesV2(running, suite=goe2b) lacks %s", sb.ID)
	}
	if err := sb.CloseWithContext(ctx); err != nil {
		t.Fatalf("Close (kill): %v", err)
	}
	if _, err := sb.InfoWithContext(ctx); !isNotFound(err) {
		t.Fatalf("Info after kill: %v, want SandboxNotFoundError", err)
	}
}

func containsSandbox(list []e2b.SandboxInfo, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}

// The create answer's `domain` (hutchd --domain) is what the client builds
// envd's host name from: a client told another domain still reaches envd.
func TestDomainComesFromTheCreateAnswer(t *testing.T) {
	c := newClient(t, "no-such-domain.invalid")
	sb := newSandbox(t, c)
	res, err := sb.Commands.Run(testContext(t), "echo via-domain")
	if err != nil {
		t.Fatalf("Run through the answered domain: %v", err)
	}
	if res.Stdout != "via-domain\n" {
		t.Fatalf("stdout = %q", res.Stdout)
	}
}

// go-e2b speaks Connect with the binary protobuf codec, and hutch answers
// in it: unary calls and server streams alike.
func TestEnvdAnswersInTheBinaryProtobufCodec(t *testing.T) {
	seen := &mediaTypes{}
	c := newRecordingClient(t, domain, seen)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	if res, err := sb.Commands.Run(ctx, "echo proto"); err != nil || res.Stdout != "proto\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if _, err := sb.Filesystem.Stat(ctx, "/home/user"); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	for _, pair := range []string{
		"application/connect+proto -> application/connect+proto",
		"application/proto -> application/proto",
	} {
		if !seen.has(pair) {
			t.Errorf("no envd call %s (seen %v)", pair, seen.pairs)
		}
	}
}

func TestConnectByID(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	again, err := c.Connect(ctx, sb.ID, 300)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	res, err := again.Commands.Run(ctx, "echo connected")
	if err != nil || res.Stdout != "connected\n" {
		t.Fatalf("Run on the connected sandbox: %+v, %v", res, err)
	}
}

func TestSetTimeoutMovesTheEnd(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	if err := sb.SetTimeout(900); err != nil {
		t.Fatalf("SetTimeout: %v", err)
	}
	info, err := sb.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	end, err := time.Parse(time.RFC3339, info.EndAt)
	if err != nil {
		t.Fatalf("endAt %q: %v", info.EndAt, err)
	}
	// Created with 300 s; now at least 15 minutes from a moment before the call.
	if until := time.Until(end); until < 800*time.Second {
		t.Fatalf("endAt %s is only %s away after SetTimeout(900)", info.EndAt, until)
	}
}

func TestMetrics(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	m, err := sb.Metrics()
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	if len(m) == 0 || m[0].MemTotal <= 0 || m[0].CPUCount <= 0 {
		t.Fatalf("Metrics = %+v, want a sample with memory and CPUs", m)
	}
}

func TestPauseResumeKeepsFiles(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	if _, err := sb.Filesystem.WriteString(ctx, "/home/user/kept.txt", "kept\n"); err != nil {
		t.Fatalf("WriteString: %v", err)
	}
	if err := sb.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	running, err := sb.IsRunning()
	if err != nil || running {
		t.Fatalf("IsRunning after Pause = %v, %v; want false", running, err)
	}
	if err := sb.Resume(300); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	running, err = sb.IsRunning()
	if err != nil || !running {
		t.Fatalf("IsRunning after Resume = %v, %v; want true", running, err)
	}
	got, err := sb.Filesystem.ReadString(ctx, "/home/user/kept.txt")
	if err != nil || got != "kept\n" {
		t.Fatalf("ReadString after resume = %q, %v", got, err)
	}
}
