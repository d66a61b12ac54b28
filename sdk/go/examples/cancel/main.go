// Command cancel shows that cancelling a context stops the command inside
// the sandbox, not only the local call.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run keeps the sandbox's deferred Close reachable (log.Fatal skips defers).
func run() error {
	client, err := hutch.NewClient("", "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := client.Create(ctx, hutch.CreateOptions{TTL: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer sb.Close()

	// A streamed command, cancelled after two seconds.
	streamCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	_, err = sb.ExecStream(streamCtx, "while true; do date +%T; sleep 0.5; done", hutch.StreamOptions{
		ExecOptions: hutch.ExecOptions{NoTimeout: true},
		OnStdout:    func(b []byte) { fmt.Print("  ", string(b)) },
	})
	fmt.Println("ExecStream returned:", err)
	fmt.Println("  errors.Is(err, context.DeadlineExceeded) =", errors.Is(err, context.DeadlineExceeded))

	// The loop is gone inside the sandbox.
	time.Sleep(200 * time.Millisecond)
	res, err := sb.Exec(ctx, "ps -eo pid,comm", hutch.ExecOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("processes left in the sandbox:\n%s", res.Stdout)
	if strings.Contains(res.Stdout, "sleep") {
		return errors.New("the command is still running")
	}
	return nil
}
