package runner

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/internal/home"
)

// SetSpecImage writes image and image_cid into the agent spec file at path, keeping its
// other fields, order and comments (the YAML node tree is edited, not re-marshalled from the
// struct), atomically; the result must still parse. Empty values are left as they are.
func SetSpecImage(path, image, imageCID string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("agent spec: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: an agent spec is a mapping of fields", path)
	}
	m := doc.Content[0]
	set := func(key, value string) {
		if value == "" {
			return
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
				return
			}
		}
		m.Content = append(m.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
	}
	set("image", image)
	set("image_cid", imageCID)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	enc.Close()
	if _, err := agentspec.Parse(buf.Bytes()); err != nil {
		return fmt.Errorf("%s: after setting the image: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(path, buf.Bytes(), fi.Mode().Perm())
}
