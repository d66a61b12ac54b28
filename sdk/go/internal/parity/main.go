// Command parity runs tests/compat/parity/scenario.txt with the Go SDK and
// prints one line per step; sdk/python/tools/parity.py does the same with
// the Python SDK, and tests/compat/parity/run.sh requires equal output.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

// q quotes bytes exactly: printable ASCII as is, every other byte (and the
// quote and backslash) as \xHH; sdk/python/tools/parity.py quotes the same.
func q(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func jsonArg(s string) string {
	var v string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		fmt.Fprintf(os.Stderr, "parity: bad JSON string %s: %v\n", s, err)
		os.Exit(2)
	}
	return v
}

func errLine(err error) string {
	var api *hutch.APIError
	if asAPI(err, &api) {
		return fmt.Sprintf("error code=%s status=%d", api.Code, api.StatusCode)
	}
	return "error " + err.Error()
}

func asAPI(err error, out **hutch.APIError) bool {
	for err != nil {
		if a, ok := err.(*hutch.APIError); ok {
			*out = a
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func execLine(verb string, r *hutch.ExecResult, stdout, stderr string) string {
	return fmt.Sprintf("%s exit=%d stdout=%s stderr=%s timed_out=%v", verb, r.ExitCode, q(stdout), q(stderr), r.TimedOut)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: parity SCENARIO")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	c, err := hutch.NewClient("", "", hutch.WithRetryPolicy(hutch.NoRetry))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	var sb *hutch.Sandbox
	var vol *hutch.Volume
	pid := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		args := strings.Fields(rest)
		out := step(ctx, c, &sb, &vol, &pid, verb, rest, args)
		fmt.Println(out)
	}
	if sb != nil {
		_ = sb.Close()
	}
}

func step(ctx context.Context, c *hutch.Client, sbp **hutch.Sandbox, volp **hutch.Volume, pid *int,
	verb, rest string, args []string) string {
	sb := *sbp
	switch verb {
	case "create":
		s, err := c.Create(ctx, hutch.CreateOptions{TTL: 10 * time.Minute})
		if err != nil {
			return errLine(err)
		}
		*sbp = s
		return "create status=" + string(s.Status)
	case "exec", "timeout":
		cmd, opts := rest, hutch.ExecOptions{}
		if verb == "timeout" {
			n, _ := strconv.Atoi(args[0])
			cmd, opts.Timeout = "sleep 30", time.Duration(n)*time.Second
		}
		r, err := sb.Exec(ctx, cmd, opts)
		if err != nil {
			return errLine(err)
		}
		return execLine(verb, r, r.Stdout, r.Stderr)
	case "argv":
		var argv []string
		_ = json.Unmarshal([]byte(rest), &argv)
		r, err := sb.ExecArgv(ctx, argv, hutch.ExecOptions{})
		if err != nil {
			return errLine(err)
		}
		return execLine(verb, r, r.Stdout, r.Stderr)
	case "stream":
		var o, e bytes.Buffer
		r, err := sb.ExecStream(ctx, rest, hutch.StreamOptions{OnStdout: func(b []byte) { o.Write(b) },
			OnStderr: func(b []byte) { e.Write(b) }})
		if err != nil {
			return errLine(err)
		}
		return execLine(verb, r, o.String(), e.String())
	case "write":
		path, data, _ := strings.Cut(rest, " ")
		w, err := sb.Files.WriteFile(ctx, path, []byte(jsonArg(data)))
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("write path=%s size=%d", w.Path, w.Size)
	case "read":
		b, err := sb.Files.ReadFile(ctx, args[0])
		if err != nil {
			return errLine(err)
		}
		return "read " + q(string(b))
	case "range":
		off, _ := strconv.ParseInt(args[1], 10, 64)
		n, _ := strconv.ParseInt(args[2], 10, 64)
		rc, err := sb.Files.ReadRange(ctx, args[0], off, n)
		if err != nil {
			return errLine(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			return errLine(err)
		}
		return "range " + q(string(b))
	case "stat":
		e, err := sb.Files.Stat(ctx, args[0])
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("stat name=%s type=%s size=%d mode=%04o", e.Name, e.Type, e.Size, uint32(e.Mode.Perm()))
	case "mkdir":
		e, err := sb.Files.MakeDir(ctx, args[0])
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("mkdir path=%s type=%s", e.Path, e.Type)
	case "move":
		e, err := sb.Files.Rename(ctx, args[0], args[1])
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("move path=%s type=%s", e.Path, e.Type)
	case "list":
		es, err := sb.Files.List(ctx, args[0], 3)
		if err != nil {
			return errLine(err)
		}
		var parts []string
		for _, e := range es {
			parts = append(parts, e.Path+":"+string(e.Type))
		}
		sort.Strings(parts)
		return "list " + strings.Join(parts, ",")
	case "exists":
		ok, err := sb.Files.Exists(ctx, args[0])
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("exists %v", ok)
	case "remove", "remove-recursive":
		if err := sb.Files.Remove(ctx, args[0], verb == "remove-recursive"); err != nil {
			return errLine(err)
		}
		return verb + " ok"
	case "bg":
		p, err := sb.Processes.Start(ctx, rest, hutch.ExecOptions{})
		if err != nil {
			return errLine(err)
		}
		*pid = p.PID
		return "bg started"
	case "stdin":
		if err := sb.Processes.SendStdin(ctx, *pid, []byte(jsonArg(rest))); err != nil {
			return errLine(err)
		}
		return "stdin ok"
	case "wait":
		r, err := sb.Processes.Wait(ctx, *pid)
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("wait exit=%d", r.ExitCode)
	case "attach":
		from, _ := strconv.ParseInt(args[0], 10, 64)
		var o, e bytes.Buffer
		r, err := sb.Processes.Connect(ctx, *pid, hutch.ConnectOptions{From: from,
			OnStdout: func(b []byte) { o.Write(b) }, OnStderr: func(b []byte) { e.Write(b) }})
		if err != nil {
			return errLine(err)
		}
		return execLine(verb, r, o.String(), e.String())
	case "pause", "resume":
		f := sb.Pause
		if verb == "resume" {
			f = sb.Resume
		}
		info, err := f(ctx)
		if err != nil {
			return errLine(err)
		}
		return verb + " status=" + string(info.Status)
	case "fork":
		n, _ := strconv.Atoi(args[0])
		kids, err := sb.Fork(ctx, n)
		if err != nil {
			return errLine(err)
		}
		var outs []string
		for _, k := range kids {
			r, err := k.Exec(ctx, "cat /home/p/sub/b.txt 2>&1; echo $?", hutch.ExecOptions{})
			if err != nil {
				return errLine(err)
			}
			outs = append(outs, q(r.Stdout))
			_ = k.Close()
		}
		return fmt.Sprintf("fork count=%d outputs=%s", len(kids), strings.Join(outs, ","))
	case "volume":
		v, err := c.CreateVolume(ctx, args[0], 32)
		if err != nil {
			return errLine(err)
		}
		*volp = v
		return fmt.Sprintf("volume name=%s size_mb=%d", v.Name, v.SizeMB)
	case "volwrite":
		path, data, _ := strings.Cut(rest, " ")
		w, err := (*volp).Files.WriteFile(ctx, path, []byte(jsonArg(data)))
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("volwrite size=%d", w.Size)
	case "volread":
		b, err := (*volp).Files.ReadFile(ctx, args[0])
		if err != nil {
			return errLine(err)
		}
		return "volread " + q(string(b))
	case "voldelete":
		if err := c.DeleteVolume(ctx, (*volp).Name); err != nil {
			return errLine(err)
		}
		return "voldelete ok"
	case "connect":
		s, err := c.Get(ctx, args[0])
		if err != nil {
			return errLine(err)
		}
		return "connect status=" + string(s.Status)
	case "delete":
		if err := sb.Kill(ctx); err != nil {
			return errLine(err)
		}
		return "delete ok"
	}
	fmt.Fprintf(os.Stderr, "parity: unknown step %q\n", verb)
	os.Exit(2)
	return ""
}
