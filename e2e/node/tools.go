//go:build tools

// Package tools pins the node binaries the real-node tier builds; build.sh runs `go build` on
// each of these import paths.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
