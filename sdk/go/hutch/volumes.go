package hutch

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// VolumeMount mounts a named volume into a sandbox at create.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"` // absolute path inside the sandbox
	ReadOnly bool   `json:"read_only,omitempty"`
}

// VolumeInfo is a volume as the server reports it.
type VolumeInfo struct {
	Name      string    `json:"name"`
	SizeMB    int       `json:"size_mb"`
	CreatedAt time.Time `json:"created_at"`
	UsedBytes uint64    `json:"used_bytes"`
	// InUseBy lists the sandboxes that have it mounted.
	InUseBy []string `json:"in_use_by"`
}

// Volume is a handle on a named persistent volume: storage that outlives
// the sandboxes it is mounted into, capped at its size.
type Volume struct {
	VolumeInfo
	// Files reads and writes the volume's files without a sandbox. Paths
	// are relative to the volume's root; AsUser does not apply.
	Files *Files
}

func (c *Client) newVolume(info VolumeInfo) *Volume {
	return &Volume{VolumeInfo: info, Files: &Files{c: c, base: volumePath(info.Name, "fs")}}
}

func volumePath(name string, rest ...string) string {
	p := "/v1/volumes/" + url.PathEscape(name)
	for _, s := range rest {
		p += "/" + s
	}
	return p
}

// CreateVolume makes an empty volume of sizeMB (0: the server's default).
// A name already taken is an error for which IsConflict is true.
func (c *Client) CreateVolume(ctx context.Context, name string, sizeMB int) (*Volume, error) {
	body := map[string]interface{}{"name": name}
	if sizeMB > 0 {
		body["size_mb"] = sizeMB
	}
	var info VolumeInfo
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: "/v1/volumes", jsonBody: body}, &info); err != nil {
		return nil, err
	}
	return c.newVolume(info), nil
}

// GetVolume fetches a volume; IsNotFound is true for an unknown name.
func (c *Client) GetVolume(ctx context.Context, name string) (*Volume, error) {
	var info VolumeInfo
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: volumePath(name)}, &info); err != nil {
		return nil, err
	}
	return c.newVolume(info), nil
}

// ListVolumes returns every volume, ordered by name.
func (c *Client) ListVolumes(ctx context.Context) ([]*Volume, error) {
	var resp struct {
		Volumes []VolumeInfo `json:"volumes"`
	}
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: "/v1/volumes"}, &resp); err != nil {
		return nil, err
	}
	out := make([]*Volume, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		out = append(out, c.newVolume(v))
	}
	return out, nil
}

// DeleteVolume deletes a volume and its data. While a sandbox has it
// mounted the server refuses (IsConflict).
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.doJSON(ctx, &request{method: http.MethodDelete, path: volumePath(name)}, nil)
}
