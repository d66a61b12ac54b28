package hutch_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hutch-sandbox/hutch/sdk/go/hutch"
)

func TestVolumeOutlivesItsSandbox(t *testing.T) {
	t.Parallel()
	c := liveClient(t)
	ctx := testCtx(t, 60*time.Second)
	v, err := c.CreateVolume(ctx, "gosdk-vol", 32)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteVolume(testCtx(t, 10*time.Second), "gosdk-vol") })
	if v.SizeMB != 32 || v.Name != "gosdk-vol" {
		t.Fatalf("volume info: %+v", v.VolumeInfo)
	}
	if _, err := c.CreateVolume(ctx, "gosdk-vol", 32); !hutch.IsConflict(err) {
		t.Fatalf("second CreateVolume: want conflict, got %v", err)
	}
	// Seeded through the file API, then changed by a sandbox.
	if _, err := v.Files.WriteFile(ctx, "/seed.txt", []byte("seed\n")); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	mount := []hutch.VolumeMount{{Name: "gosdk-vol", Path: "/mnt/v"}}
	a, err := c.Create(ctx, hutch.CreateOptions{TTL: time.Minute, Volumes: mount})
	if err != nil {
		t.Fatalf("Create with volume: %v", err)
	}
	if len(a.Volumes) != 1 || a.Volumes[0].Path != "/mnt/v" {
		t.Fatalf("sandbox volumes: %+v", a.Volumes)
	}
	if res, err := a.Exec(ctx, "cat /mnt/v/seed.txt && echo from-a >> /mnt/v/seed.txt", hutch.ExecOptions{}); err != nil || res.Stdout != "seed\n" {
		t.Fatalf("exec in a: %v %+v", err, res)
	}
	if err := c.DeleteVolume(ctx, "gosdk-vol"); !hutch.IsConflict(err) {
		t.Fatalf("DeleteVolume while mounted: want conflict, got %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := newSandbox(t, c, hutch.CreateOptions{Volumes: []hutch.VolumeMount{{Name: "gosdk-vol", Path: "/data", ReadOnly: true}}})
	if res, err := b.Exec(ctx, "cat /data/seed.txt", hutch.ExecOptions{}); err != nil || res.Stdout != "seed\nfrom-a\n" {
		t.Fatalf("exec in b: %v %+v", err, res)
	}
	got, err := v.Files.ReadFile(ctx, "seed.txt")
	if err != nil || !bytes.Equal(got, []byte("seed\nfrom-a\n")) {
		t.Fatalf("ReadFile: %v %q", err, got)
	}
	all, err := c.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range all {
		if x.Name == "gosdk-vol" {
			found = len(x.InUseBy) == 1 && x.InUseBy[0] == b.ID
		}
	}
	if !found {
		t.Fatalf("ListVolumes: %+v", all)
	}
	if _, err := c.GetVolume(ctx, "gosdk-none"); !hutch.IsNotFound(err) {
		t.Fatalf("GetVolume unknown: %v", err)
	}
	if _, err := c.Create(ctx, hutch.CreateOptions{Volumes: []hutch.VolumeMount{{Name: "gosdk-none", Path: "/x"}}}); !hutch.IsNotFound(err) ||
		!strings.Contains(err.Error(), "volume") {
		t.Fatalf("Create with unknown volume: %v", err)
	}
}
