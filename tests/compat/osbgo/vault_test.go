// The OpenSandbox Go SDK's Credential Vault flow from its README, against
// hutch (issue 26): a sandbox created with CredentialProxy enabled and a
// deny-by-default policy, the vault written through the sidecar client the
// SDK resolves (the egress endpoint, port 18080), then a request from
// inside the sandbox to the test world's HTTPS host, which answers
// "granted" only with the right x-api-key. Nothing in the sandbox is
// configured by the test: the trust store and its variables come with the
// create. run.sh builds the world, its HTTPS server and hutchd.
package osbgo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	opensandbox "github.com/alibaba/OpenSandbox/sdks/sandbox/go"
)

// The secret the world's server wants (run.sh passes it on), and a second
// credential for the customHeaders binding.
var (
	secret = os.Getenv("HUTCH_VAULT_SECRET")
	other  = "client-id-5e4d3c2b1a"
)

func config(t *testing.T) opensandbox.ConnectionConfig {
	t.Helper()
	if os.Getenv("OPEN_SANDBOX_DOMAIN") == "" || secret == "" {
		t.Skip("run through run.sh (OPEN_SANDBOX_DOMAIN, HUTCH_VAULT_SECRET)")
	}
	return opensandbox.ConnectionConfig{RequestTimeout: 2 * time.Minute}
}

// run runs a shell command in the sandbox and returns its stdout lines
// (execd sends one event per line), joined and trimmed.
func run(t *testing.T, ctx context.Context, sb *opensandbox.Sandbox, cmd string) string {
	t.Helper()
	ex, err := sb.RunCommand(ctx, cmd, nil)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	lines := make([]string, 0, len(ex.Stdout))
	for _, m := range ex.Stdout {
		lines = append(lines, strings.TrimRight(m.Text, "\n"))
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// status is an API error's HTTP status (0 for none or another error).
func status(err error) int {
	var apiErr *opensandbox.APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

func noSecret(t *testing.T, what string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) || strings.Contains(string(raw), other) {
		t.Fatalf("%s answers a credential's value: %s", what, raw)
	}
}

func TestCredentialVaultReadmeFlow(t *testing.T) {
	cfg := config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The README's create: an outbound policy and the credential proxy on.
	sandbox, err := opensandbox.CreateSandbox(ctx, cfg, opensandbox.SandboxCreateOptions{
		Image: "python:3.11",
		NetworkPolicy: &opensandbox.NetworkPolicy{
			DefaultAction: "deny",
			Egress: []opensandbox.NetworkRule{
				{Action: "allow", Target: "api.vault.test"},
				{Action: "allow", Target: "other.vault.test"},
			},
		},
		CredentialProxy: &opensandbox.CredentialProxyConfig{Enabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sandbox.Kill(context.Background()) }()

	// The README's vault, on the world's host.
	state, err := sandbox.CreateCredentialVault(ctx, opensandbox.CredentialVaultCreateRequest{
		Credentials: []opensandbox.Credential{
			{
				Name: "api-token",
				Source: opensandbox.InlineCredentialSource{
					Type:  opensandbox.CredentialSourceInline,
					Value: secret,
				},
			},
		},
		Bindings: []opensandbox.CredentialBinding{
			{
				Name: "api-token",
				Match: opensandbox.CredentialMatch{
					Schemes: []opensandbox.CredentialScheme{opensandbox.CredentialSchemeHTTPS},
					Ports:   []int{443},
					Hosts:   []string{"api.vault.test"},
					Paths:   []string{"/secret", "/redirect"},
				},
				Auth: opensandbox.CredentialAuth{
					Type:       opensandbox.CredentialAuthAPIKey,
					Name:       "x-api-key",
					Credential: "api-token",
				},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "create", state)
	if len(state.Credentials) != 1 || len(state.Bindings) != 1 || state.Revision < 1 {
		t.Fatalf("state after create: %+v", state)
	}

	// curl and Python, configured by nothing the test did.
	if got := run(t, ctx, sandbox, "curl -sS https://api.vault.test/secret"); got != "granted" {
		t.Fatalf("curl through the vault: %q", got)
	}
	py := `python3 -c "import urllib.request; print(urllib.request.urlopen('https://api.vault.test/secret').read().decode(), end='')"`
	if got := run(t, ctx, sandbox, py); got != "granted" {
		t.Fatalf("urllib through the vault: %q", got)
	}
	// The sandbox holds no value: not in its environment, not in its files.
	scan := "S=" + secret[:6] + "; S=${S}" + secret[6:] + "; env | grep -c \"$S\"; " +
		"grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev \"$S\" / 2>/dev/null | head -3"
	if got := run(t, ctx, sandbox, scan); got != "0" {
		t.Fatalf("the secret is visible inside the sandbox: %q", got)
	}

	// Reads: names and bindings, never a value.
	vault, err := sandbox.CredentialVault(ctx)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := vault.ListCredentialVaultCredentials(ctx)
	if err != nil || len(creds.Credentials) != 1 || creds.Credentials[0].Name != "api-token" ||
		creds.Credentials[0].SourceType != "inline" {
		t.Fatalf("credentials: %+v %v", creds, err)
	}
	binding, err := vault.GetCredentialVaultBinding(ctx, "api-token")
	if err != nil || binding.Auth == nil || binding.Auth.Type != "apiKey" || binding.Auth.Name != "x-api-key" ||
		binding.Match == nil || len(binding.Match.Hosts) != 1 || binding.Match.Hosts[0] != "api.vault.test" {
		t.Fatalf("binding: %+v %v", binding, err)
	}
	if _, err := vault.GetCredentialVaultCredential(ctx, "nope"); status(err) != 404 {
		t.Fatalf("an unknown credential: %v", err)
	}
	// The lifecycle API's server-routed copy answers the same state.
	lc := opensandbox.NewLifecycleClient(cfg.GetBaseURL()+"/v1", cfg.GetAPIKey())
	routed, err := lc.GetCredentialVault(ctx, sandbox.ID())
	if err != nil || routed.Revision != state.Revision {
		t.Fatalf("server-routed state: %+v %v", routed, err)
	}
	noSecret(t, "server-routed get", routed)

	// A patch: a second credential, and the binding replaced by a
	// customHeaders one that adds both headers to /echo.
	rev := state.Revision
	state, err = sandbox.PatchCredentialVault(ctx, opensandbox.CredentialVaultPatchRequest{
		ExpectedRevision: &rev,
		Credentials: &opensandbox.CredentialMutationSet{Add: []opensandbox.Credential{
			{Name: "client-id", Source: opensandbox.InlineCredentialSource{Value: other}},
		}},
		Bindings: &opensandbox.CredentialBindingMutationSet{Replace: []opensandbox.CredentialBinding{{
			Name:  "api-token",
			Match: opensandbox.CredentialMatch{Hosts: []string{"api.vault.test"}, Paths: []string{"/echo"}},
			Auth: opensandbox.CredentialAuth{Type: opensandbox.CredentialAuthCustomHeaders, Headers: []opensandbox.CustomHeaderEntry{
				{Name: "x-api-key", Credential: "api-token"},
				{Name: "x-client-id", Credential: "client-id"},
			}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "patch", state)
	if state.Revision <= rev || len(state.Credentials) != 2 || len(state.Bindings) != 1 ||
		state.Bindings[0].Auth == nil || state.Bindings[0].Auth.Type != "customHeaders" {
		t.Fatalf("state after patch: %+v", state)
	}
	var echo map[string]any
	if err := json.Unmarshal([]byte(run(t, ctx, sandbox, "curl -sS https://api.vault.test/echo")), &echo); err != nil {
		t.Fatal(err)
	}
	if echo["x-api-key"] != secret || echo["x-client-id"] != other {
		t.Fatalf("customHeaders did not add both headers: %v", echo)
	}
	// /secret is no longer bound: the request goes out untouched.
	if got := run(t, ctx, sandbox, "curl -sS https://api.vault.test/secret"); got != "denied" {
		t.Fatalf("an unbound path: %q", got)
	}
	// A stale revision is refused and changes nothing.
	if _, err := sandbox.PatchCredentialVault(ctx, opensandbox.CredentialVaultPatchRequest{
		ExpectedRevision: &rev,
		Bindings:         &opensandbox.CredentialBindingMutationSet{Delete: []string{"api-token"}},
	}); status(err) != 409 {
		t.Fatalf("a stale expectedRevision: %v", err)
	}

	// Deleting the vault stops injection at once; then it reads as absent.
	if err := sandbox.DeleteCredentialVault(ctx); err != nil {
		t.Fatal(err)
	}
	if got := run(t, ctx, sandbox, "curl -sS -k https://api.vault.test/secret"); got != "denied" {
		t.Fatalf("after the vault's delete: %q", got)
	}
	if _, err := sandbox.GetCredentialVault(ctx); status(err) != 404 {
		t.Fatalf("a deleted vault reads: %v", err)
	}
}
