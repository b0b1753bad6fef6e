//go:build tools

// Keeps the peer's module requirements (go mod tidy); the binaries are built by scripts/catalog-peers.mjs.
package tools

import (
	_ "github.com/GoogleContainerTools/kpt-functions-catalog/functions/go/set-namespace"
)
