package hutch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

// opaqueReader hides the size of its reader, forcing a chunked upload.
type opaqueReader struct{ r io.Reader }

func (o opaqueReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestFilesFiftyMegabyteRoundTrip(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{MemoryMB: 512, DiskMB: 512})
	ctx := testCtx(t, 60*time.Second)
	const size = 50 << 20

	src := io.LimitReader(rand.New(rand.NewSource(42)), size)
	h := sha256.New()
	start := time.Now()
	info, err := sb.Files.Write(ctx, "/home/user/big.bin", opaqueReader{io.TeeReader(src, h)})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != size || info.Path != "/home/user/big.bin" {
		t.Fatalf("write answer %+v", info)
	}
	want := h.Sum(nil)
	upload := time.Since(start)

	rc, err := sb.Files.Read(ctx, "/home/user/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	h2 := sha256.New()
	n, err := io.Copy(h2, rc)
	rc.Close()
	if err != nil || n != size {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	if !bytes.Equal(h2.Sum(nil), want) {
		t.Fatal("sha256 of the read-back file differs")
	}
	// And inside the sandbox.
	res, err := sb.Exec(ctx, "sha256sum /home/user/big.bin", hutch.ExecOptions{})
	if err != nil || !strings.HasPrefix(res.Stdout, sprintHex(want)) {
		t.Fatalf("sha256sum in sandbox: %v %q", err, res.Stdout)
	}
	t.Logf("50 MiB: upload %v, total %v", upload, time.Since(start))
}

func sprintHex(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

func TestFilesOperations(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	ctx := testCtx(t, 30*time.Second)
	f := sb.Files

	// WriteFile / ReadFile, binary-safe, known size.
	data := []byte("hello\x00\xff world\n")
	if info, err := f.WriteFile(ctx, "/tmp/d/a.bin", data); err != nil || info.Size != int64(len(data)) {
		t.Fatalf("WriteFile: %v %+v", err, info)
	}
	got, err := f.ReadFile(ctx, "/tmp/d/a.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile: %v %q", err, got)
	}
	// Empty file.
	if _, err := f.WriteFile(ctx, "/tmp/d/empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := f.ReadFile(ctx, "/tmp/d/empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %q", err, got)
	}
	// Write from a strings.Reader and from an *os.File (sizes known), with a mode.
	if _, err := f.Write(ctx, "/tmp/d/s.sh", strings.NewReader("#!/bin/sh\necho script\n"), hutch.WithMode(0o755)); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(ctx, "/tmp/d/s.sh", hutch.ExecOptions{}); err != nil || res.Stdout != "script\n" {
		t.Fatalf("run written script: %v %+v", err, res)
	}
	local := filepath.Join(t.TempDir(), "local.txt")
	if err := os.WriteFile(local, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lf.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if info, err := f.Write(ctx, "/tmp/d/from-file", lf); err != nil || info.Size != 7 {
		t.Fatalf("Write from *os.File: %v %+v", err, info)
	}
	lf.Close()

	// ReadRange.
	rc, err := f.ReadRange(ctx, "/tmp/d/from-file", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(rc)
	rc.Close()
	if string(part) != "567" {
		t.Fatalf("ReadRange: %q", part)
	}
	if _, err := f.ReadRange(ctx, "/tmp/d/from-file", 100, -1); hutch.ErrorCode(err) != hutch.CodeRangeNotSatisfiable {
		t.Fatalf("range past end: %v", err)
	}

	// Stat.
	st, err := f.Stat(ctx, "/tmp/d/s.sh")
	if err != nil || st.Type != hutch.FileTypeFile || st.Mode.Perm() != 0o755 || st.Name != "s.sh" || st.ModTime.IsZero() {
		t.Fatalf("Stat: %v %+v", err, st)
	}
	if _, err := f.Stat(ctx, "/tmp/nope"); !hutch.IsFileNotFound(err) || !hutch.IsNotFound(err) {
		t.Fatalf("Stat missing: %v", err)
	}
	if ok, err := f.Exists(ctx, "/tmp/nope"); ok || err != nil {
		t.Fatalf("Exists missing: %v %v", ok, err)
	}
	if _, err := f.Read(ctx, "/tmp/nope"); !hutch.IsFileNotFound(err) {
		t.Fatalf("Read missing: %v", err)
	}

	// MakeDir, List, Rename.
	d, err := f.MakeDir(ctx, "/tmp/d/sub/deeper")
	if err != nil || !d.IsDir() || !d.Mode.IsDir() {
		t.Fatalf("MakeDir: %v %+v", err, d)
	}
	if _, err := f.MakeDir(ctx, "/tmp/d/sub/deeper"); err != nil {
		t.Fatalf("MakeDir existing: %v", err)
	}
	if _, err := f.MakeDir(ctx, "/tmp/d/a.bin"); !hutch.IsConflict(err) {
		t.Fatalf("MakeDir over a file: %v", err)
	}
	if _, err := sb.Exec(ctx, "ln -s /tmp/d/a.bin /tmp/d/link", hutch.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	entries, err := f.List(ctx, "/tmp/d", 1)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]hutch.EntryInfo{}
	for _, e := range entries {
		names[e.Name] = e
	}
	for _, n := range []string{"a.bin", "empty", "s.sh", "from-file", "sub", "link"} {
		if _, ok := names[n]; !ok {
			t.Fatalf("List misses %s: %+v", n, entries)
		}
	}
	if _, ok := names["deeper"]; ok {
		t.Fatal("depth 1 listed a grandchild")
	}
	if l := names["link"]; l.Type != hutch.FileTypeSymlink || l.SymlinkTarget != "/tmp/d/a.bin" || l.Mode&fs.ModeSymlink == 0 {
		t.Fatalf("symlink entry %+v", l)
	}
	deep, err := f.List(ctx, "/tmp/d", 2)
	if err != nil || len(deep) != len(entries)+1 {
		t.Fatalf("List depth 2: %v %d vs %d", err, len(deep), len(entries))
	}
	if _, err := f.List(ctx, "/tmp/d/a.bin", 1); hutch.ErrorCode(err) != hutch.CodeNotADirectory {
		t.Fatalf("List a file: %v", err)
	}
	mv, err := f.Rename(ctx, "/tmp/d/a.bin", "/tmp/d/sub/b.bin")
	if err != nil || mv.Path != "/tmp/d/sub/b.bin" {
		t.Fatalf("Rename: %v %+v", err, mv)
	}
	if ok, _ := f.Exists(ctx, "/tmp/d/a.bin"); ok {
		t.Fatal("Rename left the source")
	}

	// Remove.
	if err := f.Remove(ctx, "/tmp/d/sub", false); !hutch.IsConflict(err) {
		t.Fatalf("non-recursive Remove of a non-empty dir: %v", err)
	}
	if err := f.Remove(ctx, "/tmp/d/sub", true); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "/tmp/d/empty", false); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.Exists(ctx, "/tmp/d/sub/b.bin"); ok {
		t.Fatal("recursive Remove left a file")
	}

	// User option on every route: "user" may not touch root's home.
	asUser := hutch.AsUser("user")
	for name, err := range map[string]error{
		"Stat":    func() error { _, err := f.Stat(ctx, "/root/.bashrc", asUser); return err }(),
		"List":    func() error { _, err := f.List(ctx, "/root", 1, asUser); return err }(),
		"Write":   func() error { _, err := f.WriteFile(ctx, "/root/w", []byte("x"), asUser); return err }(),
		"MakeDir": func() error { _, err := f.MakeDir(ctx, "/root/newdir", asUser); return err }(),
		"Rename":  func() error { _, err := f.Rename(ctx, "/tmp/d/s.sh", "/root/s.sh", asUser); return err }(),
		"Remove":  f.Remove(ctx, "/etc/passwd", false, asUser),
		"Read":    func() error { _, err := f.ReadFile(ctx, "/root/.bashrc", asUser); return err }(),
	} {
		if hutch.ErrorCode(err) != hutch.CodePermissionDenied {
			t.Errorf("%s as user: want permission_denied, got %v", name, err)
		}
	}

	// User option: a file written as "user" is owned by it.
	if _, err := f.WriteFile(ctx, "/tmp/owned", []byte("x"), hutch.AsUser("user")); err != nil {
		t.Logf("AsUser(user): %v (template without a 'user' account?)", err)
	} else if res, _ := sb.Exec(ctx, "stat -c %U /tmp/owned", hutch.ExecOptions{}); strings.TrimSpace(res.Stdout) != "user" {
		t.Fatalf("owner %q", res.Stdout)
	}
}

func TestFilesReadCancelled(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	sb := newSandbox(t, c, hutch.CreateOptions{})
	if _, err := sb.Exec(testCtx(t, 20*time.Second), "head -c 33554432 /dev/zero > /tmp/z", hutch.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, err := sb.Files.Read(ctx, "/tmp/z")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 1024)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = io.Copy(io.Discard, rc)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: want context.Canceled, got %T %v", err, err)
	}
	// The sandbox still answers.
	if _, err := sb.Files.Stat(testCtx(t, 10*time.Second), "/tmp/z"); err != nil {
		t.Fatal(err)
	}
}
