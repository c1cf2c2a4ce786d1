//go:build tools

// Package tools pins the MPI operator (github.com/kubeflow/mpi-operator/cmd/mpi-operator), the
// e2e tier's MPIJob referee; e2e/build-controllers.sh runs `go build` on it.
package tools

import (
	_ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
)
