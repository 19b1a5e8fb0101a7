// quick-exit: the image a sidecar's KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE names. When the
// sidecar's image is replaced by this one, kubelet restarts the container with the sidecar's own args,
// so it ignores every argument and exits 0 at once.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("quick-exit: exiting 0")
	os.Exit(0)
}
