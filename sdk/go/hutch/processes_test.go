package hutch_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

func TestProcesses(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	ctx := testCtx(t, 30*time.Second)

	const cmd = "read x; echo got:$x; exit 3"
	p, err := sb.Processes.Start(ctx, cmd, hutch.ExecOptions{})
	if err != nil || p.PID <= 0 {
		t.Fatalf("start: %v %+v", err, p)
	}
	info, err := p.Info(ctx)
	if err != nil || !info.Running || info.Status != "running" || info.Cmd != cmd || info.ExitCode != nil {
		t.Fatalf("info: %v %+v", err, info)
	}
	list, err := sb.Processes.List(ctx)
	found := false
	for _, li := range list {
		found = found || li.PID == p.PID
	}
	if err != nil || !found {
		t.Fatalf("list: %v %+v", err, list)
	}
	if err := p.SendStdin(ctx, []byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := p.Connect(ctx, hutch.ConnectOptions{OnStdout: func(b []byte) { out.Write(b) }})
	if err != nil || res.ExitCode != 3 || out.String() != "got:hi\n" {
		t.Fatalf("connect: %v %+v %q", err, res, out.String())
	}
	info, err = p.Info(ctx)
	if err != nil || info.Running || info.Status != "exited" || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Fatalf("after exit: %v %+v", err, info)
	}

	sleeper, err := sb.Processes.Start(ctx, "sleep 1000", hutch.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Signal(ctx, hutch.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err = sleeper.Wait(ctx)
	if err != nil || res.ExitCode != 128+15 {
		t.Fatalf("signalled: %v %+v", err, res)
	}
	if _, err := sb.Processes.Get(ctx, 999999); !hutch.IsNotFound(err) {
		t.Fatalf("unknown pid: %v", err)
	}
}
