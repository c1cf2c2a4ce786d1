//go:build tools

// Package tools pins Volcano's scheduler and controller manager, the e2e tier's Volcano referee;
// e2e/build-volcano.sh runs `go build` on these import paths.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
