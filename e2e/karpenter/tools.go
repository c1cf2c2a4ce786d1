//go:build tools

// Package tools pins Karpenter's KWOK cloud provider (sigs.k8s.io/karpenter/kwok), the e2e
// tier's Karpenter referee; e2e/build-karpenter.sh runs `go build` on this import path.
package tools

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
