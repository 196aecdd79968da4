package tasks

import (
	"context"
	"testing"
)

const svampDir = "testdata/airs-bench/MathQuestionAnsweringSVAMPAccuracy"
const svampCID = "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi"

func TestPackKuboVector(t *testing.T) {
	c, err := Pack(context.Background(), fixtureDir(t, svampDir), NewHashOnlyDAG(), PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != svampCID {
		t.Fatalf("root CID = %s, want kubo's %s", c, svampCID)
	}
}
