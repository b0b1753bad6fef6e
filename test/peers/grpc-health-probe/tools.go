//go:build tools

// Keeps the peer's module requirements (go mod tidy): the grpc-health-probe that Porch's
// wrapper-server image ships, built by scripts/catalog-peers.mjs to compare fnr's probe with it.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
)
