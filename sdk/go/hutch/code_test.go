package hutch_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
	"github.com/hutch-sandbox/hutch/sdk/go/internal/testserver"
)

// codeSandbox starts a hutchd on the state dir where CTest's code_api_test
// built the code-interpreter template (HUTCH_CODE_STATE_DIR) and makes a
// sandbox from it; skips without one.
func codeSandbox(t *testing.T) (*hutch.Client, *hutch.Sandbox) {
	t.Helper()
	dir := os.Getenv("HUTCH_CODE_STATE_DIR")
	if dir == "" || os.Getenv("HUTCHD_BIN") == "" {
		t.Skip("HUTCH_CODE_STATE_DIR or HUTCHD_BIN not set (CTest's go_sdk_test sets both)")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no code-interpreter state dir %s (code_api_test builds it)", dir)
	}
	s, err := testserver.StartWithState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hutchd log:\n%s", s.Log())
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := hutch.NewClient(s.URL, s.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 2*time.Minute)
	sb, err := c.Create(ctx, hutch.CreateOptions{Template: "code-interpreter", TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Kill(context.Background()) })
	return c, sb
}

func TestRunCode(t *testing.T) {
	_, sb := codeSandbox(t)
	ctx := testCtx(t, 3*time.Minute)

	var streamed []string
	ex, err := sb.RunCode(ctx, "x = 41\nprint('hi')\nx + 1", hutch.CodeOptions{
		OnStdout: func(l hutch.OutputLine) { streamed = append(streamed, l.Text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Text() != "42" || ex.StdoutText() != "hi\n" || ex.Error != nil || ex.ExecutionCount < 1 {
		t.Fatalf("first run: %+v", ex)
	}
	if strings.Join(streamed, "") != "hi\n" {
		t.Errorf("OnStdout saw %q", streamed)
	}
	ex, err = sb.RunCode(ctx, "x", hutch.CodeOptions{})
	if err != nil || ex.Text() != "41" {
		t.Fatalf("state across runs: %+v %v", ex, err)
	}
	ex, err = sb.RunCode(ctx, "1/0", hutch.CodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Error == nil || ex.Error.Name != "ZeroDivisionError" ||
		!strings.Contains(ex.Error.Traceback, "ZeroDivisionError") {
		t.Fatalf("error: %+v", ex.Error)
	}
	ex, err = sb.RunCode(ctx, "import os; print(os.environ['GO_T'])",
		hutch.CodeOptions{Env: map[string]string{"GO_T": "per-call"}})
	if err != nil || ex.StdoutText() != "per-call\n" {
		t.Fatalf("env: %+v %v", ex, err)
	}

	// A plot: a PNG and a line chart with its title.
	ex, err = sb.RunCode(ctx, "import matplotlib.pyplot as plt\nplt.plot([1,2],[3,4])\n"+
		"plt.title('go')\nplt.show()", hutch.CodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var png bool
	for _, r := range ex.Results {
		if strings.HasPrefix(r.PNG, "iVBORw0KGgo") && strings.Contains(string(r.Chart), `"line"`) &&
			strings.Contains(string(r.Chart), `"go"`) {
			png = true
		}
	}
	if !png {
		t.Errorf("no PNG with a line chart titled go in %d results", len(ex.Results))
	}

	// The timeout interrupts; the context keeps its state.
	ex, err = sb.RunCode(ctx, "import time\nkept = 3\ntime.sleep(60)",
		hutch.CodeOptions{Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !ex.TimedOut || ex.Error == nil || ex.Error.Name != "TimeoutError" {
		t.Fatalf("timeout: %+v", ex)
	}
	if ex, err = sb.RunCode(ctx, "kept", hutch.CodeOptions{}); err != nil || ex.Text() != "3" {
		t.Fatalf("after the timeout: %+v %v", ex, err)
	}
}

func TestCodeContexts(t *testing.T) {
	_, sb := codeSandbox(t)
	ctx := testCtx(t, 3*time.Minute)
	cc, err := sb.CreateCodeContext(ctx, "bash", "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if cc.Language != "bash" || cc.Cwd != "/tmp" || cc.ID == "" {
		t.Fatalf("context: %+v", cc)
	}
	list, err := sb.CodeContexts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range list {
		found = found || l.ID == cc.ID
	}
	if !found {
		t.Errorf("%s not in %+v", cc.ID, list)
	}
	run := func(code string) string {
		ex, err := sb.RunCode(ctx, code, hutch.CodeOptions{ContextID: cc.ID})
		if err != nil {
			t.Fatal(err)
		}
		return ex.StdoutText()
	}
	if got := run("V=5; pwd"); got != "/tmp\n" {
		t.Errorf("pwd: %q", got)
	}
	if got := run("echo v=$V"); got != "v=5\n" {
		t.Errorf("state: %q", got)
	}
	if err := sb.RestartCodeContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	if got := run("echo v=$V"); got != "v=\n" {
		t.Errorf("after restart: %q", got)
	}
	if err := sb.RemoveCodeContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	err = sb.RemoveCodeContext(ctx, cc.ID)
	var api *hutch.APIError
	if !errors.As(err, &api) || api.StatusCode != 404 {
		t.Errorf("removing twice: %v", err)
	}
	_, err = sb.RunCode(ctx, "1", hutch.CodeOptions{ContextID: "nope", Language: "python"})
	if !errors.As(err, &api) || api.Code != "invalid_request" {
		t.Errorf("context and language: %v", err)
	}
}

// A sandbox without the code server: a clear error, not a hang.
func TestRunCodeWithoutTheTemplate(t *testing.T) {
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	_, err := sb.RunCode(testCtx(t, time.Minute), "1", hutch.CodeOptions{})
	var api *hutch.APIError
	if !errors.As(err, &api) || api.Code != "port_unreachable" ||
		!strings.Contains(api.Message, "code-interpreter") {
		t.Fatalf("got %v", err)
	}
}
