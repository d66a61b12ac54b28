package hutch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// Files moves files in and out of a sandbox or a volume. Paths are
// resolved inside the sandbox's own root (relative paths: the user's home)
// or the volume's root. Get it from Sandbox.Files or Volume.Files.
type Files struct {
	c    *Client
	base string // the route's /fs prefix
}

// FileOption adjusts a file operation.
type FileOption func(*fileOpts)

type fileOpts struct {
	user string
	mode fs.FileMode
	set  bool
}

// AsUser performs the operation as this sandbox user (default root): it
// governs permission checks and the owner of created files.
func AsUser(user string) FileOption { return func(o *fileOpts) { o.user = user } }

// WithMode sets the permission bits of a file created by Write (default 0644).
func WithMode(mode fs.FileMode) FileOption {
	return func(o *fileOpts) { o.mode, o.set = mode.Perm(), true }
}

func (f *Files) query(path string, opts []FileOption) (url.Values, fileOpts) {
	var o fileOpts
	for _, fn := range opts {
		fn(&o)
	}
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if o.user != "" {
		q.Set("user", o.user)
	}
	return q, o
}

// FileType is the kind of a directory entry.
type FileType string

const (
	FileTypeFile    FileType = "file"
	FileTypeDir     FileType = "dir"
	FileTypeSymlink FileType = "symlink"
	FileTypeOther   FileType = "other"
)

// EntryInfo describes a file in the sandbox (of the link itself for a
// symlink).
type EntryInfo struct {
	Name string
	Path string
	Type FileType
	Size int64
	// Mode holds the permission bits, plus fs.ModeDir or fs.ModeSymlink
	// according to Type.
	Mode          fs.FileMode
	ModTime       time.Time
	SymlinkTarget string
}

// IsDir reports whether the entry is a directory.
func (e *EntryInfo) IsDir() bool { return e.Type == FileTypeDir }

// UnmarshalJSON decodes the server's entry object.
func (e *EntryInfo) UnmarshalJSON(b []byte) error {
	var w struct {
		Name          string    `json:"name"`
		Path          string    `json:"path"`
		Type          FileType  `json:"type"`
		Size          int64     `json:"size"`
		Mode          uint32    `json:"mode"`
		MTime         time.Time `json:"mtime"`
		SymlinkTarget string    `json:"symlink_target"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	mode := fs.FileMode(w.Mode & 0o777)
	if w.Mode&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if w.Mode&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if w.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	switch w.Type {
	case FileTypeDir:
		mode |= fs.ModeDir
	case FileTypeSymlink:
		mode |= fs.ModeSymlink
	}
	*e = EntryInfo{Name: w.Name, Path: w.Path, Type: w.Type, Size: w.Size, Mode: mode,
		ModTime: w.MTime, SymlinkTarget: w.SymlinkTarget}
	return nil
}

// WriteInfo is the answer to a write.
type WriteInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Write streams r into the file at path, creating parent directories and
// replacing any existing file atomically (a failed upload leaves no half
// file). r is read until io.EOF and is not closed. When the size of r is
// known (bytes.Reader, strings.Reader, bytes.Buffer, a regular *os.File)
// it is sent as Content-Length, otherwise with chunked encoding; any size
// is fine, bounded by the sandbox's disk. Streamed uploads are not retried.
func (f *Files) Write(ctx context.Context, path string, r io.Reader, opts ...FileOption) (*WriteInfo, error) {
	q, o := f.query(path, opts)
	if o.set {
		q.Set("mode", fmt.Sprintf("%04o", uint32(o.mode)))
	}
	var info WriteInfo
	err := f.c.doJSON(ctx, &request{method: http.MethodPut, path: f.base, query: q,
		body: r, contentLength: readerSize(r), contentType: "application/octet-stream"}, &info)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// WriteFile writes data to the file at path (retried when retryable).
func (f *Files) WriteFile(ctx context.Context, path string, data []byte, opts ...FileOption) (*WriteInfo, error) {
	q, o := f.query(path, opts)
	if o.set {
		q.Set("mode", fmt.Sprintf("%04o", uint32(o.mode)))
	}
	if data == nil {
		data = []byte{}
	}
	var info WriteInfo
	err := f.c.doJSON(ctx, &request{method: http.MethodPut, path: f.base, query: q,
		rawBody: data, contentType: "application/octet-stream"}, &info)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// readerSize returns the number of bytes left in r, or -1 if unknown.
func readerSize(r io.Reader) int64 {
	switch v := r.(type) {
	case nil:
		return 0
	case interface{ Len() int }: // bytes.Reader, bytes.Buffer, strings.Reader
		return int64(v.Len())
	case *os.File:
		st, err := v.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return -1
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil || off > st.Size() {
			return -1
		}
		return st.Size() - off
	case *io.LimitedReader:
		if inner := readerSize(v.R); inner >= 0 {
			if inner < v.N {
				return inner
			}
			return v.N
		}
	}
	return -1
}

// Read opens the file at path for streaming. The caller must Close the
// reader; cancelling ctx aborts the transfer (reads then fail with an error
// wrapping ctx.Err()).
func (f *Files) Read(ctx context.Context, path string, opts ...FileOption) (io.ReadCloser, error) {
	return f.read(ctx, path, "", opts)
}

// ReadRange opens length bytes of the file at path starting at offset
// (length < 0: to the end). Asking past the end of the file is an error
// with code range_not_satisfiable.
func (f *Files) ReadRange(ctx context.Context, path string, offset, length int64, opts ...FileOption) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, errors.New("hutch: ReadRange: negative offset")
	}
	if length == 0 {
		return io.NopCloser(&io.LimitedReader{}), nil
	}
	rng := "bytes=" + strconv.FormatInt(offset, 10) + "-"
	if length > 0 {
		rng += strconv.FormatInt(offset+length-1, 10)
	}
	return f.read(ctx, path, rng, opts)
}

func (f *Files) read(ctx context.Context, path, rng string, opts []FileOption) (io.ReadCloser, error) {
	q, _ := f.query(path, opts)
	r := &request{method: http.MethodGet, path: f.base, query: q}
	if rng != "" {
		r.header = http.Header{"Range": {rng}}
	}
	resp, err := f.c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	return &bodyReader{rc: resp.Body, ctx: ctx, c: f.c, r: r}, nil
}

// bodyReader turns read errors into the SDK's error kinds.
type bodyReader struct {
	rc  io.ReadCloser
	ctx context.Context
	c   *Client
	r   *request
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		if cerr := b.ctx.Err(); cerr != nil {
			return n, b.c.ctxError(b.r, cerr)
		}
		return n, &ConnectionError{Method: b.r.method, Path: b.r.path, Err: err}
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.rc.Close() }

// ReadFile reads the whole file at path.
func (f *Files) ReadFile(ctx context.Context, path string, opts ...FileOption) ([]byte, error) {
	rc, err := f.Read(ctx, path, opts...)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// List lists the directory at path, depth levels deep (1–32; 0 means 1).
// Symlinks are not followed.
func (f *Files) List(ctx context.Context, path string, depth int, opts ...FileOption) ([]EntryInfo, error) {
	q, _ := f.query(path, opts)
	if depth <= 0 {
		depth = 1
	}
	q.Set("depth", strconv.Itoa(depth))
	var resp struct {
		Entries []EntryInfo `json:"entries"`
	}
	if err := f.c.doJSON(ctx, &request{method: http.MethodGet, path: f.base + "/list", query: q}, &resp); err != nil {
		return nil, err
	}
	return resp.Entries, nil
}

// Stat describes the file at path (the link itself for a symlink). A
// missing file is an error for which IsFileNotFound is true.
func (f *Files) Stat(ctx context.Context, path string, opts ...FileOption) (*EntryInfo, error) {
	q, _ := f.query(path, opts)
	var e EntryInfo
	if err := f.c.doJSON(ctx, &request{method: http.MethodGet, path: f.base + "/stat", query: q}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Exists reports whether path exists.
func (f *Files) Exists(ctx context.Context, path string, opts ...FileOption) (bool, error) {
	_, err := f.Stat(ctx, path, opts...)
	if err == nil {
		return true, nil
	}
	if IsFileNotFound(err) {
		return false, nil
	}
	return false, err
}

// Remove deletes the file or directory at path. A non-empty directory
// needs recursive (else the error is a conflict).
func (f *Files) Remove(ctx context.Context, path string, recursive bool, opts ...FileOption) error {
	q, _ := f.query(path, opts)
	if recursive {
		q.Set("recursive", "true")
	}
	return f.c.doJSON(ctx, &request{method: http.MethodDelete, path: f.base, query: q}, nil)
}

// MakeDir creates the directory path and its parents; an existing
// directory is fine.
func (f *Files) MakeDir(ctx context.Context, path string, opts ...FileOption) (*EntryInfo, error) {
	// POST routes take the user in the JSON body (hutchd ignores ?user= there).
	_, o := f.query("", opts)
	body := map[string]string{"path": path}
	if o.user != "" {
		body["user"] = o.user
	}
	var e EntryInfo
	err := f.c.doJSON(ctx, &request{method: http.MethodPost, path: f.base + "/mkdir",
		jsonBody: body, idempotent: true}, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// Rename moves from to to, replacing to if it exists.
func (f *Files) Rename(ctx context.Context, from, to string, opts ...FileOption) (*EntryInfo, error) {
	_, o := f.query("", opts)
	body := map[string]string{"from": from, "to": to}
	if o.user != "" {
		body["user"] = o.user
	}
	var e EntryInfo
	err := f.c.doJSON(ctx, &request{method: http.MethodPost, path: f.base + "/move",
		jsonBody: body}, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}
