//go:build tools

// Keeps the peer's module requirements (go mod tidy): Porch's e2e API suite (its package
// test/e2e/api holds only tests, so its helper package stands for it here). The test binary is
// built with `go test -c` by scripts/porch-peers.mjs.
package tools

import (
	_ "github.com/nephio-project/porch/test/e2e/suiteutils"
)
