// Command fork forks a sandbox; servers without fork answer not_supported,
// which this program reports clearly.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
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
	if _, err := sb.Files.WriteFile(ctx, "/home/user/state.txt", []byte("prepared once\n")); err != nil {
		return err
	}

	forks, err := sb.Fork(ctx, 3)
	if hutch.IsNotSupported(err) {
		var apiErr *hutch.APIError
		errors.As(err, &apiErr)
		fmt.Printf("fork is not supported by this server (HTTP %d, code %q, request %s):\n  %s\n",
			apiErr.StatusCode, apiErr.Code, apiErr.RequestID, apiErr.Message)
		return nil
	}
	if err != nil {
		return err
	}
	for _, f := range forks {
		defer f.Close()
		data, err := f.Files.ReadFile(ctx, "/home/user/state.txt")
		if err != nil {
			return err
		}
		fmt.Printf("fork %s sees: %s", f.ID, data)
	}
	return nil
}
