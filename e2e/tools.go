//go:build tools

// Package tools pins the control-plane binaries the e2e tier builds; build.sh runs
// `go build` on each of these import paths.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
