// Command files uploads a file, lists a directory and streams a file back.
package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
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

	// Small files: WriteFile / ReadFile.
	if _, err := sb.Files.WriteFile(ctx, "/home/user/project/main.py", []byte("print('hi from a file')\n")); err != nil {
		return err
	}
	// Any size, streamed: Write takes an io.Reader (here 8 MiB generated on the fly).
	big := io.LimitReader(strings.NewReader(strings.Repeat("0123456789abcdef", 1<<19)), 8<<20)
	info, err := sb.Files.Write(ctx, "/home/user/project/data.bin", big)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes)\n", info.Path, info.Size)

	res, err := sb.Exec(ctx, "python3 main.py 2>/dev/null || cat main.py", hutch.ExecOptions{Cwd: "/home/user/project"})
	if err != nil {
		return err
	}
	fmt.Print(res.Stdout)

	entries, err := sb.Files.List(ctx, "/home/user/project", 1)
	if err != nil {
		return err
	}
	for _, e := range entries {
		fmt.Printf("%-5s %v %8d %s\n", e.Type, e.Mode, e.Size, e.Path)
	}

	// Stream a file back without holding it in memory.
	rc, err := sb.Files.Read(ctx, "/home/user/project/data.bin")
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil {
		return err
	}
	fmt.Printf("read back %d bytes, sha256 %x\n", n, h.Sum(nil))

	if _, err := sb.Files.Stat(ctx, "/home/user/missing"); hutch.IsFileNotFound(err) {
		fmt.Println("missing file:", err)
	}
	if err := sb.Files.Remove(ctx, "/home/user/project", true); err != nil {
		return err
	}
	return nil
}
