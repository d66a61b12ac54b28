// vault-get: GETs a URL with Go's net/http as a program would, with no
// TLS configuration of its own (the system trust store, or SSL_CERT_FILE),
// and prints the body. api_vault_egress_test builds it static
// (CGO_ENABLED=0) on the host and copies it into a sandbox: the test
// template has no Go toolchain.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Println("FAIL", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println("FAIL", err)
		os.Exit(1)
	}
	os.Stdout.Write(body)
}
