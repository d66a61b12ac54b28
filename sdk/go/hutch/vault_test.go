package hutch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

func TestVaultNamesAndBindingsWithoutValues(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 60*time.Second)
	const secret = "sk-gosdk-2f9e8d7c6b"
	sb := newSandbox(t, c, hutch.CreateOptions{Vault: &hutch.Vault{
		Credentials: []hutch.Credential{{Name: "api", Value: secret}},
	}})
	binding := hutch.Binding{
		Name:  "world",
		Match: hutch.BindingMatch{Host: "*.example.test", Paths: []string{"/v1/*"}},
		Auth:  hutch.BindingAuth{Type: hutch.AuthHeader, Credential: "api", Header: "x-api-key"},
	}
	if err := sb.PutBinding(ctx, binding); err != nil {
		t.Fatalf("PutBinding: %v", err)
	}
	missing := binding
	missing.Auth.Credential = "nope"
	if err := sb.PutBinding(ctx, missing); err == nil {
		t.Fatal("PutBinding without its credential: want an error")
	}
	v, err := sb.Vault(ctx)
	if err != nil {
		t.Fatalf("Vault: %v", err)
	}
	if len(v.Credentials) != 1 || v.Credentials[0].Name != "api" || v.Credentials[0].Value != "" {
		t.Fatalf("credentials: %+v", v.Credentials)
	}
	if len(v.Bindings) != 1 || v.Bindings[0].Match.Port != 443 || v.Bindings[0].Auth.Header != "x-api-key" {
		t.Fatalf("bindings: %+v", v.Bindings)
	}
	if err := sb.DeleteCredential(ctx, "api"); !hutch.IsConflict(err) {
		t.Fatalf("DeleteCredential in use: want conflict, got %v", err)
	}
	if err := sb.DeleteBinding(ctx, "world"); err != nil {
		t.Fatal(err)
	}
	if err := sb.DeleteCredential(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	// The value never reached the sandbox.
	res, err := sb.Exec(ctx, "env; cat /proc/1/environ", hutch.ExecOptions{})
	if err != nil || strings.Contains(res.Stdout, secret) {
		t.Fatalf("exec: %v (secret in the sandbox: %v)", err, strings.Contains(res.Stdout, secret))
	}
}
