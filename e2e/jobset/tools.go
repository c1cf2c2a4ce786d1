//go:build tools

// Package tools pins the JobSet controller manager (sigs.k8s.io/jobset, the module's root
// package main), the e2e tier's JobSet referee; e2e/build-controllers.sh runs `go build` on it.
package tools

import (
	_ "sigs.k8s.io/jobset"
)
