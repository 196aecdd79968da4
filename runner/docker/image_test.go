package docker

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// imageTar builds a tar in the engine's legacy save layout holding config under its
// digest's name, plus the given extra entries.
func imageTar(t testing.TB, config []byte, manifest string, extra map[string]string) []byte {
	t.Helper()
	sum := sha256.Sum256(config)
	name := hex.EncodeToString(sum[:]) + ".json"
	manifest = strings.ReplaceAll(manifest, "CONFIG", name)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(n string, data []byte) {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	add(name, config)
	add("layer/layer.tar", []byte("not really a layer"))
	for n, d := range extra {
		add(n, []byte(d))
	}
	if manifest != "" {
		add("manifest.json", []byte(manifest))
	}
	tw.Close()
	return buf.Bytes()
}

func idOf(config []byte) string {
	sum := sha256.Sum256(config)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestCheckImageTar(t *testing.T) {
	config := []byte(`{"architecture":"amd64","os":"linux"}`)
	id := idOf(config)
	good := `[{"Config":"CONFIG","RepoTags":null,"Layers":["layer/layer.tar"]}]`
	cases := []struct {
		name, manifest string
		extra          map[string]string
		want           string // "" accepts; else words of the refusal
		wantID         string
	}{
		{name: "untagged, its ID", manifest: good},
		{name: "another image", manifest: good, wantID: idOf([]byte("{}")), want: "not the spec's image"},
		{name: "tagged", manifest: `[{"Config":"CONFIG","RepoTags":["victim:latest"]}]`, want: "tags the image as victim:latest"},
		{name: "tagged, other case", manifest: `[{"config":"CONFIG","repotags":["victim:latest"]}]`, want: "tags the image"},
		{name: "two images", manifest: `[{"Config":"CONFIG"},{"Config":"CONFIG"}]`, want: "lists 2 images"},
		{name: "repositories", manifest: good, extra: map[string]string{"repositories": `{"victim":{"latest":"x"}}`}, want: "`repositories` file"},
		{name: "no manifest", want: "no manifest.json"},
		{name: "config missing", manifest: `[{"Config":"nope.json"}]`, want: "not a file in the tar"},
		{name: "index names it", manifest: good, extra: map[string]string{"index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"victim:latest"}}]}`}, want: "index.json names the image"},
		{name: "index untagged", manifest: good, extra: map[string]string{"index.json": `{"manifests":[{"annotations":{}}]}`}},
		{name: "manifest twice", manifest: good, extra: map[string]string{"./manifest.json": `[]`}, want: "appears twice"},
		{name: "escaping name", manifest: good, extra: map[string]string{"../x": "x"}, want: "leaves the archive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := id
			if c.wantID != "" {
				want = c.wantID
			}
			err := CheckImageTar(bytes.NewReader(imageTar(t, config, c.manifest, c.extra)), want)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused a good tar: %v", err)
			case c.want != "" && (err == nil || !IsImageTarRefused(err) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a refusal saying %q", err, c.want)
			}
		})
	}
}

// FuzzCheckImageTar: a peer's tar is outside input; CheckImageTar must never panic, and
// whatever it accepts has the wanted config digest under manifest.json.
func FuzzCheckImageTar(f *testing.F) {
	config := []byte(`{"os":"linux"}`)
	f.Add(imageTar(f, config, `[{"Config":"CONFIG","RepoTags":null}]`, nil))
	f.Add(imageTar(f, config, `[{"Config":"CONFIG","RepoTags":["a:b"]}]`, nil))
	f.Add(imageTar(f, config, `[{"Config":"CONFIG"}]`, map[string]string{"index.json": `{"manifests":[{}]}`}))
	f.Add([]byte("not a tar"))
	id := idOf(config)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := CheckImageTar(bytes.NewReader(data), id); err != nil && !IsImageTarRefused(err) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}
