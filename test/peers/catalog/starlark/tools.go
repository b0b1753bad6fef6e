//go:build tools

// Keeps the peer's module requirements (go mod tidy); the binaries are built by scripts/catalog-peers.mjs.
package tools

import (
	_ "github.com/kptdev/krm-functions-catalog/functions/go/starlark"
)
