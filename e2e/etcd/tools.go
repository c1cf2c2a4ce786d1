//go:build tools

// Package tools pins the etcd server; its main package is the module root.
package tools

import _ "go.etcd.io/etcd/server/v3"
