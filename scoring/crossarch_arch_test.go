package scoring

import "runtime"

func archName() string { return runtime.GOOS + "/" + runtime.GOARCH }
