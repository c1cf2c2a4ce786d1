//go:build tools

// Package tools pins Kueue's manager (sigs.k8s.io/kueue/cmd/kueue), the e2e tier's Kueue quota
// referee; e2e/build-kueue.sh runs `go build` on this import path.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
