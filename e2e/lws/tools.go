//go:build tools

// Package tools pins the LeaderWorkerSet controller manager (sigs.k8s.io/lws/cmd), the e2e
// tier's LWS referee; e2e/build-controllers.sh runs `go build` on it.
package tools

import (
	_ "sigs.k8s.io/lws/cmd"
)
