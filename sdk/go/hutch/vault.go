package hutch

import (
	"context"
	"net/http"
	"net/url"
)

// A sandbox's credential vault: credentials the sandbox never sees, added
// by the server to the sandbox's outbound HTTPS requests that match a
// binding (docs/api.md "Credential vault").

// Credential is a named secret: Value inline, or Source, the name of a host
// secret the server's operator declared (--vault-source). Reads never
// return a value.
type Credential struct {
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
	Source string `json:"source,omitempty"`
}

// BindingMatch selects requests: Host exact or "*.example.com" (every name
// below it); Port 443 when zero; Paths globs and Methods (empty: any).
type BindingMatch struct {
	Scheme  string   `json:"scheme,omitempty"`
	Host    string   `json:"host"`
	Port    int      `json:"port,omitempty"`
	Paths   []string `json:"paths,omitempty"`
	Methods []string `json:"methods,omitempty"`
}

// Auth types of a binding.
const (
	AuthBearer = "bearer" // Authorization: Bearer <value>
	AuthBasic  = "basic"  // Authorization: Basic (Username + ":" + value, or value as user:password)
	AuthHeader = "header" // Header: <value>
	AuthQuery  = "query"  // ?Param=<value>
)

// BindingAuth says which credential a matching request gets and how.
type BindingAuth struct {
	Type       string `json:"type"`
	Credential string `json:"credential"`
	Header     string `json:"header,omitempty"`
	Param      string `json:"param,omitempty"`
	Username   string `json:"username,omitempty"`
}

// Binding is a named rule: requests matching Match get Auth's credential.
type Binding struct {
	Name  string       `json:"name"`
	Match BindingMatch `json:"match"`
	Auth  BindingAuth  `json:"auth"`
}

// Vault is a sandbox's credentials and bindings. Read back, credentials
// carry their names only.
type Vault struct {
	Credentials []Credential `json:"credentials"`
	Bindings    []Binding    `json:"bindings"`
}

func vaultPath(id string, rest ...string) string {
	return sandboxPath(id, append([]string{"vault"}, rest...)...)
}

// Vault reads the sandbox's vault: credential names and bindings.
func (s *Sandbox) Vault(ctx context.Context) (*Vault, error) {
	var v Vault
	err := s.c.doJSON(ctx, &request{method: http.MethodGet, path: vaultPath(s.ID)}, &v)
	return &v, err
}

// SetVault replaces the sandbox's vault whole.
func (s *Sandbox) SetVault(ctx context.Context, v Vault) error {
	return s.c.doJSON(ctx, &request{method: http.MethodPut, path: vaultPath(s.ID), jsonBody: v}, nil)
}

// PutCredential adds or replaces one credential.
func (s *Sandbox) PutCredential(ctx context.Context, c Credential) error {
	body := map[string]string{}
	if c.Value != "" {
		body["value"] = c.Value
	}
	if c.Source != "" {
		body["source"] = c.Source
	}
	p := vaultPath(s.ID, "credentials", url.PathEscape(c.Name))
	return s.c.doJSON(ctx, &request{method: http.MethodPut, path: p, jsonBody: body}, nil)
}

// DeleteCredential removes a credential; the server refuses (IsConflict)
// while a binding uses it.
func (s *Sandbox) DeleteCredential(ctx context.Context, name string) error {
	p := vaultPath(s.ID, "credentials", url.PathEscape(name))
	return s.c.doJSON(ctx, &request{method: http.MethodDelete, path: p}, nil)
}

// PutBinding adds or replaces one binding; its credential must exist.
func (s *Sandbox) PutBinding(ctx context.Context, b Binding) error {
	body := struct {
		Match BindingMatch `json:"match"`
		Auth  BindingAuth  `json:"auth"`
	}{b.Match, b.Auth}
	p := vaultPath(s.ID, "bindings", url.PathEscape(b.Name))
	return s.c.doJSON(ctx, &request{method: http.MethodPut, path: p, jsonBody: body}, nil)
}

// DeleteBinding removes a binding: the next matching request goes out
// without the credential.
func (s *Sandbox) DeleteBinding(ctx context.Context, name string) error {
	p := vaultPath(s.ID, "bindings", url.PathEscape(name))
	return s.c.doJSON(ctx, &request{method: http.MethodDelete, path: p}, nil)
}
