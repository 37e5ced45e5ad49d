package integration

import (
	"strconv"
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Issue 18 item 3: a second msgmesh on the data directory of a running
// embedded broker fails at once, naming the process that holds it; the
// first keeps serving.
func TestSecondServerOnSameDataDirFails(t *testing.T) {
	dir := t.TempDir()
	httpAddr, kafkaAddr := h.FreeAddr(t), h.FreeAddr(t)
	first := h.StartProcess(t, httpAddr, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr))

	code, out := h.RunBinary(t, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+h.FreeAddr(t), "MSGMESH_HTTP_ADDR="+h.FreeAddr(t)), "serve")
	if code == 0 {
		t.Fatalf("second server on %s exited 0:\n%s", dir, out)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(first.Pid()), "in use by another process"} {
		if !strings.Contains(out, want) {
			t.Errorf("second server's message does not say %q:\n%s", want, out)
		}
	}
	h.Must(t, first.URL, "GET", "/readyz", "", nil, 200)

	// Once the first is gone (even by kill -9) the directory is free again.
	first.Kill()
	again := h.StartProcess(t, httpAddr, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr))
	h.Must(t, again.URL, "GET", "/readyz", "", nil, 200)
}
