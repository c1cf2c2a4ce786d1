// Command pause is the real-node tier's sandbox ("pause") container and its workload container:
// it sleeps until SIGTERM or SIGINT (then exits 0) and reaps children, as the upstream pause
// container does (kubernetes build/pause/linux/pause.c). Built static (CGO_ENABLED=0) by
// e2e/build-pause.sh and wrapped into an OCI image with umoci: no registry pull.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
