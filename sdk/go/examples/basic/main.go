// Command basic creates a sandbox, runs a command in it and deletes it.
//
//	HUTCH_URL=http://127.0.0.1:8080 HUTCH_API_KEY=... go run ./examples/basic
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
	client, err := hutch.NewClient("", "") // $HUTCH_URL, $HUTCH_API_KEY
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sb, err := client.Create(ctx, hutch.CreateOptions{TTL: 5 * time.Minute, Metadata: map[string]string{"example": "basic"}})
	if err != nil {
		return err
	}
	defer sb.Close() // deletes even if ctx is cancelled by then
	fmt.Printf("sandbox %s (%s, expires %s)\n", sb.ID, sb.Status, sb.ExpiresAt.Format(time.RFC3339))

	res, err := sb.Exec(ctx, `python3 -c 'print(6*7)' 2>/dev/null || echo 42; uname -sr; exit 3`, hutch.ExecOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("exit %d in %v\nstdout:\n%s", res.ExitCode, res.Duration, res.Stdout)
	if res.Stderr != "" {
		fmt.Fprintf(os.Stderr, "stderr:\n%s", res.Stderr)
	}

	it := client.List(ctx, hutch.ListOptions{Metadata: map[string]string{"example": "basic"}})
	for it.Next() {
		fmt.Println("listed:", it.Sandbox().ID, it.Sandbox().Status)
	}
	if err := it.Err(); err != nil {
		return err
	}
	return nil
}
