package goe2b

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	e2b "github.com/matiasinsaurralde/go-e2b"
)

func TestRunReturnsOutputAndExitCode(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	res, err := sb.Commands.Run(ctx, "echo hello, world")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Stdout != "hello, world\n" || res.ExitCode != 0 {
		t.Fatalf("Run = %+v", res)
	}
	res, err = sb.Commands.Run(ctx, "echo one two three | wc -w")
	if err != nil || strings.TrimSpace(res.Stdout) != "3" {
		t.Fatalf("pipe: %+v, %v", res, err)
	}
	_, err = sb.Commands.Run(ctx, "echo bad >&2; exit 3")
	var exitErr *e2b.CommandExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode != 3 || exitErr.Stderr != "bad\n" {
		t.Fatalf("exit 3: %v, want a CommandExitError with code 3 and stderr", err)
	}
}

func TestRunOptions(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	res, err := sb.Commands.Run(testContext(t), `echo "$FOO"; pwd; id -un`,
		e2b.WithEnv(map[string]string{"FOO": "bar"}),
		e2b.WithCwd("/tmp"),
		e2b.WithUser("root"),
		e2b.WithTimeout(30*time.Second),
	)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Stdout != "bar\n/tmp\nroot\n" {
		t.Fatalf("stdout = %q, want env, cwd and user applied", res.Stdout)
	}
	res, err = sb.Commands.Run(testContext(t), "id -un")
	if err != nil || res.Stdout != "user\n" {
		t.Fatalf("default user: %+v, %v", res, err)
	}
}

func TestRunTimeoutEndsTheCommand(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	_, err := sb.Commands.Run(testContext(t), "sleep 60", e2b.WithTimeout(time.Second))
	if err == nil {
		t.Fatalf("sleep 60 with a 1 s timeout succeeded")
	}
}

func TestStartStreamsOutput(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	var mu sync.Mutex
	var out, errOut bytes.Buffer
	h, err := sb.Commands.Start(testContext(t), "for i in 1 2 3; do echo $i; done; echo oops >&2",
		e2b.WithOnStdout(func(b []byte) { mu.Lock(); out.Write(b); mu.Unlock() }),
		e2b.WithOnStderr(func(b []byte) { mu.Lock(); errOut.Write(b); mu.Unlock() }),
	)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if h.PID() == 0 {
		t.Fatalf("no pid")
	}
	res, err := h.Wait(testContext(t))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if out.String() != "1\n2\n3\n" || errOut.String() != "oops\n" || res.Stdout != "1\n2\n3\n" {
		t.Fatalf("streamed %q / %q, result %+v", out.String(), errOut.String(), res)
	}
}

func TestStdinSendAndClose(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	h, err := sb.Commands.Start(ctx, "cat", e2b.WithStdin(true))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := h.SendStdin(ctx, []byte("hello\n")); err != nil {
		t.Fatalf("SendStdin: %v", err)
	}
	if err := sb.Commands.SendStdin(ctx, h.PID(), []byte("again\n")); err != nil {
		t.Fatalf("Commands.SendStdin: %v", err)
	}
	if err := h.CloseStdin(ctx); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	res, err := h.Wait(ctx)
	if err != nil || res.Stdout != "hello\nagain\n" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
}

func TestBackgroundListReattachKill(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	h, err := sb.Commands.Start(ctx, "echo started; sleep 300")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pid := h.PID()
	procs, err := sb.Commands.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	found := false
	for _, p := range procs {
		if p.PID == pid {
			found = true
			if p.Cmd != "/bin/bash" {
				t.Fatalf("List entry %+v, want cmd /bin/bash", p)
			}
		}
	}
	if !found {
		t.Fatalf("List = %+v lacks pid %d", procs, pid)
	}
	if err := h.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	again, err := sb.Commands.Connect(ctx, pid)
	if err != nil {
		t.Fatalf("Connect (reattach): %v", err)
	}
	if again.PID() != pid {
		t.Fatalf("reattached to %d, want %d", again.PID(), pid)
	}
	killed, err := sb.Commands.Kill(ctx, pid)
	if err != nil || !killed {
		t.Fatalf("Kill = %v, %v", killed, err)
	}
	if _, err := again.Wait(ctx); err == nil {
		t.Fatalf("Wait after kill succeeded; want the killed command's error")
	}
	killed, err = sb.Commands.Kill(ctx, pid)
	if err != nil || killed {
		t.Fatalf("Kill of an ended command = %v, %v; want false", killed, err)
	}
}

func TestPtyInteractive(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	var mu sync.Mutex
	var screen bytes.Buffer
	pty, err := sb.Pty.Create(ctx, 80, 24, e2b.WithPtyOnData(func(b []byte) { mu.Lock(); screen.Write(b); mu.Unlock() }))
	if err != nil {
		t.Fatalf("Pty.Create: %v", err)
	}
	if err := sb.Pty.Resize(ctx, pty.PID(), 120, 40); err != nil {
		t.Fatalf("Pty.Resize: %v", err)
	}
	if err := sb.Pty.SendInput(ctx, pty.PID(), []byte("echo term=$TERM size=$(stty size) sum=$((6*7))\n")); err != nil {
		t.Fatalf("Pty.SendInput: %v", err)
	}
	if err := sb.Pty.SendInput(ctx, pty.PID(), []byte("exit\n")); err != nil {
		t.Fatalf("Pty.SendInput exit: %v", err)
	}
	if _, err := pty.Wait(ctx); err != nil {
		t.Fatalf("Pty Wait: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(screen.String(), "term=xterm-256color size=40 120 sum=42") {
		t.Fatalf("terminal output %q lacks the echoed line", screen.String())
	}
}

func TestPtyReattach(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	pty, err := sb.Pty.Create(ctx, 80, 24)
	if err != nil {
		t.Fatalf("Pty.Create: %v", err)
	}
	again, err := sb.Pty.Connect(ctx, pty.PID())
	if err != nil {
		_, _ = sb.Pty.Kill(ctx, pty.PID())
		skipMissing(t, "PTY re-attach (process.Process/Connect on a terminal)", err)
	}
	if again.PID() != pty.PID() {
		t.Fatalf("reattached to %d, want %d", again.PID(), pty.PID())
	}
	if ok, err := sb.Pty.Kill(ctx, pty.PID()); err != nil || !ok {
		t.Fatalf("Pty.Kill = %v, %v", ok, err)
	}
}
