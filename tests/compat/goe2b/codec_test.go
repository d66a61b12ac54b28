package goe2b

// Connect requests as go-e2b does not send them by default but the
// protocol allows: gzip-compressed, in both shapes (a unary body with
// Content-Encoding, a stream's envelope with Connect-Content-Encoding and
// its compressed flag). Built by hand with protowire on envd's field
// numbers, sent by host name like the client's own calls.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// envdToken asks the control plane for the sandbox's envd access token.
func envdToken(t *testing.T, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+hutchAddr+"/e2b/sandboxes/"+id, nil)
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var info struct {
		EnvdAccessToken string `json:"envdAccessToken"`
		Domain          string `json:"domain"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Domain != domain {
		t.Fatalf("get answered domain %q, want %q", info.Domain, domain)
	}
	return info.EnvdAccessToken
}

func envdPost(t *testing.T, id, token, path string, header map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "https://49983-"+id+"."+domain+path, bytes.NewReader(body))
	req.Header.Set("X-Access-Token", token)
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := newHTTPClient(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, got
}

func TestEnvdAcceptsGzipRequestsInBothShapes(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	token := envdToken(t, sb.ID)

	// filesystem.StatRequest{path = 1}
	stat := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "/home/user")
	resp, body := envdPost(t, sb.ID, token, "/filesystem.Filesystem/Stat",
		map[string]string{"Content-Type": "application/proto", "Content-Encoding": "gzip"}, gzipped(t, stat))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/proto" {
		t.Fatalf("gzip unary Stat: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// StatResponse{entry = 1: EntryInfo{name = 1: "user"}}
	entry, n := protowire.ConsumeBytes(body[protowire.SizeTag(1):])
	if n < 0 || !bytes.Contains(entry, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "user")) {
		t.Fatalf("StatResponse %x has no entry named user", body)
	}

	// process.StartRequest{process = 1: ProcessConfig{cmd = 1, args = 2}}
	cfg := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "/bin/echo")
	cfg = protowire.AppendString(protowire.AppendTag(cfg, 2, protowire.BytesType), "zipped")
	start := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), cfg)
	z := gzipped(t, start)
	envelope := append([]byte{1, 0, 0, 0, 0}, z...)
	binary.BigEndian.PutUint32(envelope[1:5], uint32(len(z)))
	resp, body = envdPost(t, sb.ID, token, "/process.Process/Start",
		map[string]string{"Content-Type": "application/connect+proto", "Connect-Content-Encoding": "gzip"}, envelope)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+proto" {
		t.Fatalf("gzip stream Start: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if !bytes.Contains(body, []byte("zipped\n")) {
		t.Fatalf("Start stream %q lacks the command's output", body)
	}
	end := []byte{2, 0, 0, 0, 2, '{', '}'}
	if !bytes.HasSuffix(body, end) {
		t.Fatalf("Start stream %q does not end with a clean end-of-stream message", body)
	}

	// A compression hutch does not speak is Connect's unimplemented.
	resp, body = envdPost(t, sb.ID, token, "/filesystem.Filesystem/Stat",
		map[string]string{"Content-Type": "application/proto", "Content-Encoding": "br"}, stat)
	if resp.StatusCode != 501 || !bytes.Contains(body, []byte(`"unimplemented"`)) {
		t.Fatalf("br unary Stat: %d %q, want 501 unimplemented", resp.StatusCode, body)
	}
	// Bytes that are no StatRequest are Connect's invalid_argument.
	resp, body = envdPost(t, sb.ID, token, "/filesystem.Filesystem/Stat",
		map[string]string{"Content-Type": "application/proto"}, []byte{0x0a, 0x64, 0x0a})
	if resp.StatusCode != 400 || !bytes.Contains(body, []byte(`"invalid_argument"`)) {
		t.Fatalf("malformed Stat: %d %q, want 400 invalid_argument", resp.StatusCode, body)
	}
	// A stream that fails before it starts still answers in the request's
	// codec, its error in the end-of-stream message.
	resp, body = envdPost(t, sb.ID, token, "/process.Process/Start",
		map[string]string{"Content-Type": "application/connect+proto"}, []byte{0, 0, 0, 0, 3, 0x0a, 0x64, 0x0a})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+proto" ||
		len(body) < 5 || body[0] != 2 || !bytes.Contains(body, []byte(`"invalid_argument"`)) {
		t.Fatalf("malformed Start: %d %s %q, want an end-of-stream invalid_argument", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// And a media type that names no codec is 415.
	resp, _ = envdPost(t, sb.ID, token, "/filesystem.Filesystem/Stat",
		map[string]string{"Content-Type": "application/xml"}, stat)
	if resp.StatusCode != 415 {
		t.Fatalf("application/xml Stat: %d, want 415", resp.StatusCode)
	}
}
