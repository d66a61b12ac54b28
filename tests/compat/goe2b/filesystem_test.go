package goe2b

import (
	"bytes"
	"errors"
	"testing"
	"time"

	e2b "github.com/matiasinsaurralde/go-e2b"
)

func TestFilesystemFlows(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	fs := sb.Filesystem

	info, err := fs.WriteString(ctx, "/home/user/hello.txt", "hi\n")
	if err != nil {
		t.Fatalf("WriteString: %v", err)
	}
	if info.Path != "/home/user/hello.txt" {
		t.Fatalf("WriteString info = %+v", info)
	}
	if got, err := fs.ReadString(ctx, "/home/user/hello.txt"); err != nil || got != "hi\n" {
		t.Fatalf("ReadString = %q, %v", got, err)
	}
	blob := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	if _, err := fs.WriteBytes(ctx, "/home/user/blob.bin", blob); err != nil {
		t.Fatalf("WriteBytes: %v", err)
	}
	if got, err := fs.ReadBytes(ctx, "/home/user/blob.bin"); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("ReadBytes = %v, %v", got, err)
	}

	st, err := fs.Stat(ctx, "/home/user/hello.txt")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if st.Name != "hello.txt" || st.Type != "file" || st.Size != 3 || st.ModTime.IsZero() {
		t.Fatalf("Stat = %+v", st)
	}
	if ok, err := fs.Exists(ctx, "/home/user/hello.txt"); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	if ok, err := fs.Exists(ctx, "/home/user/nope"); err != nil || ok {
		t.Fatalf("Exists(missing) = %v, %v", ok, err)
	}

	if err := fs.MakeDir(ctx, "/home/user/work"); err != nil {
		t.Fatalf("MakeDir: %v", err)
	}
	if err := fs.MakeDir(ctx, "/home/user/work"); err != nil {
		t.Fatalf("MakeDir of an existing dir: %v (a no-op in the client)", err)
	}
	moved, err := fs.Rename(ctx, "/home/user/hello.txt", "/home/user/work/hi.txt")
	if err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if moved.Path != "/home/user/work/hi.txt" {
		t.Fatalf("Rename info = %+v", moved)
	}
	entries, err := fs.List(ctx, "/home/user/work")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(entries) != 1 || entries[0].Name != "hi.txt" || entries[0].Type != "file" {
		t.Fatalf("List = %+v", entries)
	}
	home, err := fs.List(ctx, "/home/user")
	if err != nil {
		t.Fatalf("List home: %v", err)
	}
	var sawDir bool
	for _, e := range home {
		if e.Name == "work" && e.Type == "directory" {
			sawDir = true
		}
	}
	if !sawDir {
		t.Fatalf("List home = %+v lacks the directory work", home)
	}
	if err := fs.Remove(ctx, "/home/user/work/hi.txt"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if ok, err := fs.Exists(ctx, "/home/user/work/hi.txt"); err != nil || ok {
		t.Fatalf("Exists after Remove = %v, %v", ok, err)
	}
	// As E2B's envd (os.RemoveAll): a path that is not there is removed already.
	if err := fs.Remove(ctx, "/home/user/work/hi.txt"); err != nil {
		t.Fatalf("Remove of a removed file: %v, want success", err)
	}
	_, err = fs.Stat(ctx, "/home/user/work/hi.txt")
	var nf *e2b.FileNotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Stat of a removed file: %v, want FileNotFoundError", err)
	}
	if _, err := fs.ReadString(ctx, "/home/user/work/hi.txt"); !errors.As(err, &nf) {
		t.Fatalf("ReadString of a removed file: %v, want FileNotFoundError", err)
	}
}

func TestFilesystemAsAnotherUser(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	if _, err := sb.Filesystem.WriteString(ctx, "/root/secret.txt", "s", e2b.WithFileUser("root")); err != nil {
		t.Fatalf("WriteString as root: %v", err)
	}
	if _, err := sb.Filesystem.ReadString(ctx, "/root/secret.txt"); err == nil {
		t.Fatalf("user read /root/secret.txt")
	}
	if got, err := sb.Filesystem.ReadString(ctx, "/root/secret.txt", e2b.WithFileUser("root")); err != nil || got != "s" {
		t.Fatalf("ReadString as root = %q, %v", got, err)
	}
}

func TestWatchDirReportsACreate(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	fs := sb.Filesystem
	if err := fs.MakeDir(ctx, "/home/user/watched"); err != nil {
		t.Fatalf("MakeDir: %v", err)
	}
	w, err := fs.WatchDir(ctx, "/home/user/watched", false)
	if err != nil {
		t.Fatalf("WatchDir: %v", err)
	}
	if _, err := fs.WriteString(ctx, "/home/user/watched/new.txt", "x"); err != nil {
		t.Fatalf("WriteString: %v", err)
	}
	// The watcher reports what it has seen on each call; poll until the
	// create shows up (bounded by the test's context, not by a time assert).
	var seen []e2b.FilesystemEvent
	for !hasEvent(seen, "new.txt", "create") {
		evs, err := w.GetEvents(ctx)
		if err != nil {
			t.Fatalf("GetEvents: %v (seen %+v)", err, seen)
		}
		seen = append(seen, evs...)
		time.Sleep(100 * time.Millisecond)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := w.GetEvents(ctx); err == nil {
		t.Fatalf("GetEvents after Stop succeeded")
	}
}

func hasEvent(evs []e2b.FilesystemEvent, name, typ string) bool {
	for _, e := range evs {
		if e.Name == name && e.Type == typ {
			return true
		}
	}
	return false
}
