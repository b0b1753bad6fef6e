//go:build tools

// Keeps the peer's module requirements (go mod tidy); porch-server and porchctl are built by
// scripts/porch-peers.mjs.
package tools

import (
	_ "github.com/nephio-project/porch/cmd/porch"
	_ "github.com/nephio-project/porch/cmd/porchctl"
)
