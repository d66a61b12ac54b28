package goe2b

// Flows of go-e2b's README that need E2B features hutch does not serve
// yet. Each test makes the client's call; when hutch refuses it the test
// skips, naming the feature and quoting hutch's answer, and when it
// passes the result is checked as a user would.

import (
	"testing"

	e2b "github.com/matiasinsaurralde/go-e2b"
)

func TestSnapshots(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	snap, err := sb.CreateSnapshot(ctx, "checkpoint")
	if err != nil {
		skipMissing(t, "snapshots (POST /sandboxes/{id}/snapshots)", err)
	}
	if snap.SnapshotID == "" {
		t.Fatalf("CreateSnapshot = %+v", snap)
	}
	list, err := c.ListSnapshots(ctx, e2b.WithSnapshotSandboxID(sb.ID))
	if err != nil {
		skipMissing(t, "snapshot listing (GET /snapshots)", err)
	}
	if list == nil {
		t.Fatalf("ListSnapshots = nil")
	}
	if ok, err := c.DeleteSnapshot(ctx, snap.SnapshotID); err != nil || !ok {
		t.Fatalf("DeleteSnapshot = %v, %v", ok, err)
	}
}

func TestLogs(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	logs, err := sb.Logs(e2b.WithLimit(10))
	if err != nil {
		skipMissing(t, "sandbox logs (GET /v2/sandboxes/{id}/logs)", err)
	}
	// hutch's event log: the create comes first.
	if len(logs) == 0 || logs[0].Level != "info" || logs[0].Message == "" {
		t.Fatalf("Logs = %+v", logs)
	}
}

func TestFork(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	ctx := testContext(t)
	forks, err := sb.Fork(ctx, e2b.WithForkCount(2))
	if err != nil {
		skipMissing(t, "fork (POST /sandboxes/{id}/fork)", err)
	}
	for i, f := range forks {
		if f.Err != nil {
			t.Fatalf("fork %d: %v", i, f.Err)
		}
		defer func() { _ = f.Sandbox.Close() }()
		if res, err := f.Sandbox.Commands.Run(ctx, "echo forked"); err != nil || res.Stdout != "forked\n" {
			t.Fatalf("fork %d Run = %+v, %v", i, res, err)
		}
	}
}

func TestVolumes(t *testing.T) {
	c := newClient(t, domain)
	ctx := testContext(t)
	vol, err := c.CreateVolume(ctx, "goe2b-volume")
	if err != nil {
		skipMissing(t, "volumes (POST /volumes)", err)
	}
	defer func() { _, _ = c.DestroyVolume(ctx, vol.VolumeID) }()
	if _, err := vol.WriteFileString(ctx, "/config.txt", "data\n"); err != nil {
		skipMissing(t, "volume content API", err)
	}
	sb, err := c.NewSandbox(ctx, e2b.SandboxConfig{Template: "base", VolumeMounts: []e2b.VolumeMount{vol.AsMount("/mnt/data")}})
	if err != nil {
		skipMissing(t, "volumeMounts at create", err)
	}
	defer func() { _ = sb.Close() }()
	if got, err := sb.Filesystem.ReadString(ctx, "/mnt/data/config.txt"); err != nil || got != "data\n" {
		t.Fatalf("mounted volume file = %q, %v", got, err)
	}
}

func TestNetworkPolicy(t *testing.T) {
	c := newClient(t, domain)
	ctx := testContext(t)
	sb, err := c.NewSandbox(ctx, e2b.SandboxConfig{Template: "base", Network: e2b.AllowOutbound("example.com")})
	if err != nil {
		skipMissing(t, "network allowOut/denyOut at create", err)
	}
	defer func() { _ = sb.Close() }()
	if err := sb.UpdateNetwork(e2b.NetworkUpdateConfig{DenyOut: []string{e2b.AllTraffic}}); err != nil {
		skipMissing(t, "network updates (PUT /sandboxes/{id}/network)", err)
	}
}

func TestSignedFileURLs(t *testing.T) {
	c := newClient(t, domain)
	sb := newSandbox(t, c)
	if _, err := sb.Filesystem.WriteString(testContext(t), "/home/user/signed.txt", "signed\n"); err != nil {
		t.Fatalf("WriteString: %v", err)
	}
	u, err := sb.DownloadURL("/home/user/signed.txt")
	if err != nil {
		t.Fatalf("DownloadURL: %v", err)
	}
	resp, err := newHTTPClient(nil).Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		t.Skipf("needs E2B signed file URLs (signature and signature_expiration on GET /files), which hutch does not serve yet: %s answered %d", u, resp.StatusCode)
	}
}
