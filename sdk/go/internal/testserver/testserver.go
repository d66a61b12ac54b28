// Package testserver starts a real hutchd for the SDK's tests.
//
// It runs $HUTCHD_BIN with --listen 127.0.0.1:0, a temporary state
// directory and --templates-dir $HUTCH_TEMPLATES_DIR, and a random API key.
// hutchd needs root.
package testserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrNotConfigured is returned by Start when HUTCHD_BIN is not set.
var ErrNotConfigured = errors.New("testserver: HUTCHD_BIN is not set; skipping tests that need a live hutchd")

// Server is a running hutchd.
type Server struct {
	URL    string // e.g. "http://127.0.0.1:40123"
	APIKey string
	Dir    string // temporary directory (state, log)

	cmd  *exec.Cmd
	done chan error
}

// Start launches hutchd on a fresh state directory and waits until it
// answers /healthz.
func Start() (*Server, error) { return StartWithState("") }

// StartWithState is Start on an existing state directory (templates built
// once for several test runs), which Stop leaves in place; "" makes a
// fresh one.
func StartWithState(stateDir string) (*Server, error) {
	bin := os.Getenv("HUTCHD_BIN")
	if bin == "" {
		return nil, ErrNotConfigured
	}
	dir, err := os.MkdirTemp("", "hutch-go-sdk-")
	if err != nil {
		return nil, err
	}
	var kb [16]byte
	if _, err := rand.Read(kb[:]); err != nil {
		return nil, err
	}
	s := &Server{APIKey: "k_" + hex.EncodeToString(kb[:]), Dir: dir, done: make(chan error, 1)}
	if stateDir == "" {
		stateDir = filepath.Join(dir, "state")
	} else {
		// The address file of the last server there is not this one's.
		_ = os.Remove(filepath.Join(stateDir, "hutchd.addr"))
	}
	// No per-key rate limit: the package's tests run in parallel on one key
	// and together exceed the default 50 requests a second (the C++
	// tests' TestServer does the same; retry_test covers 429 handling).
	args := []string{"--listen", "127.0.0.1:0", "--state-dir", stateDir, "--rate-limit", "0"}
	if t := os.Getenv("HUTCH_TEMPLATES_DIR"); t != "" {
		args = append(args, "--templates-dir", t)
	}
	logf, err := os.Create(filepath.Join(dir, "hutchd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "HUTCH_API_KEY="+s.APIKey)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testserver: starting %s: %w", bin, err)
	}
	go func() { s.done <- s.cmd.Wait() }()

	addrFile := filepath.Join(stateDir, "hutchd.addr")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && strings.Contains(string(b), ":") {
			addr := string(bytes.TrimSpace(b))
			s.URL = "http://" + addr
			if resp, err := http.Get(s.URL + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s, nil
				}
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			log := s.Log()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("testserver: hutchd exited early (%v):\n%s", err, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log := s.Log()
			s.Stop()
			return nil, fmt.Errorf("testserver: hutchd did not come up within 30 s:\n%s", log)
		}
	}
}

// Log returns the tail of hutchd's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "hutchd.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// Stop sends SIGTERM, waits (SIGKILL after 15 s) and removes the directory.
func (s *Server) Stop() error {
	var werr error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.done:
			s.done <- err // exit status after SIGTERM is not interesting
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			werr = <-s.done
			s.done <- werr
			werr = fmt.Errorf("testserver: hutchd ignored SIGTERM for 15 s")
		}
	}
	if err := os.RemoveAll(s.Dir); err != nil && werr == nil {
		werr = err
	}
	return werr
}
