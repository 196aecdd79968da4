package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// inspect of a folder and of its CAR agree on the CID, the size and the metadata; the size
// is what the CID covers (a hidden file pack skips is not counted); the JSON carries the
// fields issue 2 names; a hostile CAR is refused as unpack refuses it.
func TestInspectFolderAndCARAgree(t *testing.T) {
	ctx := context.Background()
	dir := svampBundle(t, func(b []byte) []byte { return b })
	os.WriteFile(filepath.Join(dir, ".DS_Store"), make([]byte, 12345), 0o644)
	fromDir, err := Inspect(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	car := filepath.Join(t.TempDir(), "b.car")
	w, err := NewCARWriterDAG(car)
	if err != nil {
		t.Fatal(err)
	}
	root, err := Pack(ctx, dir, w, PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(root); err != nil {
		t.Fatal(err)
	}
	fromCAR, err := Inspect(ctx, car)
	if err != nil {
		t.Fatal(err)
	}
	if fromDir.CID != root.String() || fromCAR.CID != root.String() {
		t.Errorf("CIDs: folder %s, CAR %s, pack %s", fromDir.CID, fromCAR.CID, root)
	}
	if fromDir.Size != fromCAR.Size || fromDir.Size == 0 {
		t.Errorf("size: folder %d, CAR %d (the hidden file must not count)", fromDir.Size, fromCAR.Size)
	}
	if !reflect.DeepEqual(fromDir.Meta, fromCAR.Meta) || fromDir.Source != "folder" || fromCAR.Source != "car" {
		t.Errorf("metadata differs between folder and CAR")
	}
	b, _ := json.Marshal(fromCAR)
	var j struct {
		Name, Category, CID string
		Metric              *struct {
			Name          *string  `json:"name"`
			LowerIsBetter *bool    `json:"lower_is_better"`
			OptimalScore  *float64 `json:"optimal_score"`
		}
		SOTA *struct {
			Score *float64 `json:"score"`
			Paper *string  `json:"paper"`
			Year  *int     `json:"year"`
		} `json:"sota"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if j.Name != "MathQuestionAnsweringSVAMPAccuracy" || j.Category != "Math" || j.CID != root.String() ||
		j.Metric == nil || j.Metric.Name == nil || j.Metric.LowerIsBetter == nil || j.Metric.OptimalScore == nil ||
		j.SOTA == nil || j.SOTA.Score == nil || j.SOTA.Paper == nil || j.SOTA.Year == nil || *j.SOTA.Year != 2026 {
		t.Errorf("inspect JSON lacks a required field: %s", b)
	}

	hostile, nodes := bundleish(t, child{"..", rawFile(t, "x")})
	var ue *UnsafeError
	if _, err := Inspect(ctx, writeHostileCAR(t, hostile, nodes...)); !errors.As(err, &ue) || ue.Path != ".." {
		t.Errorf("hostile CAR: %v", err)
	}
}
