package hutch_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

func TestExecResults(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	ctx := testCtx(t, 30*time.Second)

	res, err := sb.Exec(ctx, "echo out; echo err >&2; exit 3", hutch.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.OK() || res.TimedOut || res.Truncated {
		t.Fatalf("got %+v", res)
	}
	res, err = sb.ExecArgv(ctx, []string{"sh", "-c", `printf '%s|%s|' "$1" "$X"; pwd; cat`, "sh", "arg with space"},
		hutch.ExecOptions{Env: map[string]string{"X": "y"}, Cwd: "/tmp", Stdin: "from stdin"})
	if err != nil || res.Stdout != "arg with space|y|/tmp\nfrom stdin" || !res.OK() {
		t.Fatalf("argv: %v %+v", err, res)
	}
	res, err = sb.Exec(ctx, "kill -TERM $$", hutch.ExecOptions{})
	if err != nil || res.ExitCode != 128+15 {
		t.Fatalf("signal: %v %+v", err, res)
	}
	res, err = sb.ExecArgv(ctx, []string{"no-such-program"}, hutch.ExecOptions{})
	if err != nil || res.ExitCode != 127 || res.Stderr == "" {
		t.Fatalf("missing program: %v %+v", err, res)
	}
	// Bytes that are not UTF-8 come back exactly.
	res, err = sb.Exec(ctx, `printf 'a\377\376b'; printf '\200' >&2`, hutch.ExecOptions{})
	if err != nil || res.Stdout != "a\xff\xfeb" || res.Stderr != "\x80" {
		t.Fatalf("binary: %v %q %q", err, res.Stdout, res.Stderr)
	}
	// Mostly control bytes (valid UTF-8, but six bytes each as JSON escapes)
	// come as base64 too, exactly; the byte counts are there.
	res, err = sb.Exec(ctx, `head -c 100000 /dev/zero | tr '\0' '\1'`, hutch.ExecOptions{})
	if err != nil || res.Stdout != strings.Repeat("\x01", 100000) || res.StdoutBytes != 100000 ||
		res.StdoutTruncated || res.Truncated {
		t.Fatalf("control bytes: %v len=%d bytes=%d truncated=%v", err, len(res.Stdout), res.StdoutBytes, res.Truncated)
	}
	if _, err := sb.Exec(ctx, "", hutch.ExecOptions{}); err == nil {
		t.Fatal("empty command accepted")
	}
	if _, err := sb.Exec(ctx, "true", hutch.ExecOptions{User: "nobody-here"}); !hutch.IsInvalidRequest(err) && !hutch.IsNotFound(err) {
		t.Fatalf("unknown user: %v", err)
	}
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	start := time.Now()
	res, err := sb.Exec(testCtx(t, 20*time.Second), "sleep 100", hutch.ExecOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 {
		t.Fatalf("got %+v", res)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("timeout took %v", el)
	}
	waitNoProcess(t, sb, "sleep", time.Second)
}

func TestExecContextDeadlineKillsProcess(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := sb.Exec(ctx, "sleep 100", hutch.ExecOptions{NoTimeout: true})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded, got %T %v", err, err)
	}
	var ce *hutch.ConnectionError
	if errors.As(err, &ce) || hutch.IsRetryable(err) {
		t.Fatalf("deadline must not look like a connection error: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("returned after %v", el)
	}
	waitNoProcess(t, sb, "sleep", time.Second)
}

func TestExecStreamOutputAndExit(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	var mu sync.Mutex
	var out, errb bytes.Buffer
	var order []string
	pid := 0
	res, err := sb.ExecStream(testCtx(t, 20*time.Second),
		"echo one; sleep 0.1; echo two >&2; sleep 0.1; printf '\\377'; exit 7",
		hutch.StreamOptions{
			OnStart:  func(p int) { pid = p },
			OnStdout: func(b []byte) { mu.Lock(); out.Write(b); order = append(order, "o:"+string(b)); mu.Unlock() },
			OnStderr: func(b []byte) { mu.Lock(); errb.Write(b); order = append(order, "e:"+string(b)); mu.Unlock() },
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || res.PID != pid || pid <= 0 || res.Duration < 150*time.Millisecond {
		t.Fatalf("result %+v pid %d", res, pid)
	}
	if out.String() != "one\n\xff" || errb.String() != "two\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	if len(order) < 3 || order[0] != "o:one\n" || order[1] != "e:two\n" {
		t.Fatalf("order %q", order)
	}
	// Timeout inside a stream.
	res, err = sb.ExecStream(testCtx(t, 20*time.Second), "sleep 100", hutch.StreamOptions{ExecOptions: hutch.ExecOptions{Timeout: time.Second}})
	if err != nil || !res.TimedOut || res.ExitCode != 137 {
		t.Fatalf("stream timeout: %v %+v", err, res)
	}
}

func TestExecStreamCancelKillsProcess(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.ExecStream(ctx, "echo ready; sleep 100", hutch.StreamOptions{
			ExecOptions: hutch.ExecOptions{NoTimeout: true},
			OnStdout: func(b []byte) {
				if strings.Contains(string(b), "ready") {
					cancel()
				}
			},
		})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ExecStream did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %T %v", err, err)
	}
	if errors.Is(err, hutch.ErrStreamEndedWithoutExit) {
		t.Fatalf("a cancel is not a stream that ended: %v", err)
	}
	waitNoProcess(t, sb, "sleep", time.Second)
}

func TestExecStreamCancelBeforeOutput(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.ExecStream(ctx, "sleep 100", hutch.StreamOptions{ExecOptions: hutch.ExecOptions{NoTimeout: true}})
		done <- err
	}()
	waitProcess(t, sb, "sleep")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	waitNoProcess(t, sb, "sleep", time.Second)
}

func TestExecStreamOneMegabyteLine(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	const n = 1 << 20
	var out bytes.Buffer
	chunks := 0
	res, err := sb.ExecStream(testCtx(t, 30*time.Second),
		"head -c 1048576 /dev/zero | tr '\\0' x; echo",
		hutch.StreamOptions{OnStdout: func(b []byte) { out.Write(b); chunks++ }})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if out.Len() != n+1 {
		t.Fatalf("got %d bytes, want %d", out.Len(), n+1)
	}
	if bytes.Count(out.Bytes(), []byte("x")) != n || out.Bytes()[n] != '\n' {
		t.Fatal("the line did not arrive whole")
	}
	t.Logf("1 MiB line arrived in %d chunks", chunks)
}

func TestExecStreamOnStoppedSandbox(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	if err := sb.Kill(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := sb.ExecStream(testCtx(t, 10*time.Second), "true", hutch.StreamOptions{})
	if !hutch.IsSandboxNotRunning(err) {
		t.Fatalf("got %v", err)
	}
}
