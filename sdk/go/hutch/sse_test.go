package hutch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSSEReaderLongLinesCommentsCRLF(t *testing.T) {
	long := strings.Repeat("z", 3<<20) // one 3 MiB line, far over bufio's buffer
	in := ": ping\n\n" +
		"event: start\r\ndata: {\"pid\":1}\r\n\r\n" +
		"event: stdout\ndata: {\"text\":\"" + long + "\"}\n\n" +
		": ping\n" +
		"event: multi\ndata: a\ndata: b\nid: 7\nretry: 10\n\n" +
		"data:nospace\n\n" +
		"event: exit\ndata: {\"exit_code\":0}" // no trailing blank line
	sr := newSSEReader(strings.NewReader(in))
	var got []*sseEvent
	for {
		ev, err := sr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 5 {
		t.Fatalf("got %d events", len(got))
	}
	if got[0].Event != "start" || string(got[0].Data) != `{"pid":1}` {
		t.Fatalf("start: %+v", got[0])
	}
	if got[1].Event != "stdout" || len(got[1].Data) != len(long)+len(`{"text":""}`) {
		t.Fatalf("long line cut: %d bytes", len(got[1].Data))
	}
	if got[2].Event != "multi" || string(got[2].Data) != "a\nb" {
		t.Fatalf("multi: %+v", got[2])
	}
	if got[3].Event != "message" || string(got[3].Data) != "nospace" {
		t.Fatalf("message: %+v", got[3])
	}
	if got[4].Event != "exit" {
		t.Fatalf("exit: %+v", got[4])
	}
}

func sseServer(body func(w io.Writer)) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		body(w)
	}))
}

func TestExecStreamEndedWithoutExit(t *testing.T) {
	srv := sseServer(func(w io.Writer) {
		io.WriteString(w, "event: start\ndata: {\"pid\":9}\n\n: ping\n\nevent: stdout\ndata: {\"text\":\"partial\"}\n\n")
	})
	defer srv.Close()
	c, _ := NewClient(srv.URL, "k")
	var out bytes.Buffer
	_, err := c.Sandbox("sb_1").ExecStream(context.Background(), "x", StreamOptions{OnStdout: func(b []byte) { out.Write(b) }})
	if !errors.Is(err, ErrStreamEndedWithoutExit) {
		t.Fatalf("got %v", err)
	}
	if out.String() != "partial" {
		t.Fatalf("stdout %q", out.String())
	}
}

func TestExecStreamErrorEvent(t *testing.T) {
	srv := sseServer(func(w io.Writer) {
		io.WriteString(w, "event: start\ndata: {\"pid\":9}\n\nevent: error\ndata: {\"code\":\"unavailable\",\"message\":\"agent lost\",\"request_id\":\"r_x\"}\n\n")
	})
	defer srv.Close()
	c, _ := NewClient(srv.URL, "k")
	_, err := c.Sandbox("sb_1").ExecStream(context.Background(), "x", StreamOptions{})
	if !errors.Is(err, ErrStreamEndedWithoutExit) {
		t.Fatalf("not ErrStreamEndedWithoutExit: %v", err)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "unavailable" || apiErr.RequestID != "r_x" || apiErr.Message != "agent lost" {
		t.Fatalf("got %v", err)
	}
}

func TestExecStreamBase64AndExit(t *testing.T) {
	srv := sseServer(func(w io.Writer) {
		io.WriteString(w, "event: stdout\ndata: {\"b64\":\"/w==\"}\n\nevent: stderr\ndata: {\"text\":\"é\"}\n\n")
		io.WriteString(w, "event: exit\ndata: {\"exit_code\":3,\"duration_ms\":1500,\"timed_out\":true,\"oom_killed\":true}\n\n")
		io.WriteString(w, "event: stdout\ndata: {\"text\":\"after exit\"}\n\n")
	})
	defer srv.Close()
	c, _ := NewClient(srv.URL, "k")
	var out, errb bytes.Buffer
	res, err := c.Sandbox("sb_1").ExecStream(context.Background(), "x", StreamOptions{
		OnStdout: func(b []byte) { out.Write(b) }, OnStderr: func(b []byte) { errb.Write(b) }})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "\xff" || errb.String() != "é" {
		t.Fatalf("%q %q", out.String(), errb.String())
	}
	if res.ExitCode != 3 || !res.TimedOut || !res.OOMKilled || res.Duration != 1500*time.Millisecond {
		t.Fatalf("%+v", res)
	}
}

func TestExecStreamBrokenConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "1000") // promise more than is sent
		io.WriteString(w, "event: start\ndata: {\"pid\":9}\n\n")
		w.(http.Flusher).Flush()
		hj, _ := w.(http.Hijacker)
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL, "k")
	_, err := c.Sandbox("sb_1").ExecStream(context.Background(), "x", StreamOptions{})
	var ce *ConnectionError
	if !errors.Is(err, ErrStreamEndedWithoutExit) || !errors.As(err, &ce) || errors.Is(err, context.Canceled) {
		t.Fatalf("got %T %v", err, err)
	}
}

func TestErrorStrings(t *testing.T) {
	e := &APIError{StatusCode: 404, Code: "sandbox_not_found", Message: "sandbox sb_x not found", RequestID: "r_1", Method: "GET", Path: "/v1/sandboxes/sb_x"}
	want := "hutch: GET /v1/sandboxes/sb_x: 404 sandbox_not_found: sandbox sb_x not found (request r_1)"
	if e.Error() != want {
		t.Fatalf("%q", e.Error())
	}
	wrapped := fmt.Errorf("outer: %w", e)
	if !IsNotFound(wrapped) || !IsSandboxNotFound(wrapped) || IsConflict(wrapped) || ErrorCode(wrapped) != "sandbox_not_found" {
		t.Fatal("helpers do not see through wrapping")
	}
}
