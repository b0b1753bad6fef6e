//go:build tools

// Keeps the peer's module requirements (go mod tidy); the binaries are built by scripts/catalog-peers.mjs.
package tools

import (
	_ "github.com/nephio-project/porch/func/server"
	_ "github.com/nephio-project/porch/func/wrapper-server"
)
