// Command streaming runs a command and prints its output as it arrives.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
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

	res, err := sb.ExecStream(ctx, `for i in 1 2 3; do echo "step $i"; sleep 0.5; done; echo "warning: done" >&2; exit 2`,
		hutch.StreamOptions{
			OnStart:  func(pid int) { fmt.Printf("[started pid %d]\n", pid) },
			OnStdout: func(b []byte) { os.Stdout.Write(b) },
			OnStderr: func(b []byte) { os.Stderr.Write(b) },
		})
	if err != nil {
		return err // errors.Is(err, hutch.ErrStreamEndedWithoutExit) if the sandbox died
	}
	fmt.Printf("[exit %d after %v]\n", res.ExitCode, res.Duration)
	return nil
}
