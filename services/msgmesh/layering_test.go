package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestNoServiceImportsAnother: what two services share lives in
// platform/; only this binary (services/msgmesh and its packages) wires
// services together. A services/X package, its tests included, may
// import its own subpackages and platform/, never services/Y.
func TestNoServiceImportsAnother(t *testing.T) {
	const mod = "github.com/msgmesh/msgmesh/"
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "../...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	service := func(path string) string {
		rest, ok := strings.CutPrefix(path, mod+"services/")
		if !ok {
			return ""
		}
		name, _, _ := strings.Cut(rest, "/")
		return name
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		own := service(p.ImportPath)
		if own == "" || own == "msgmesh" {
			continue
		}
		seen++
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if other := service(imp); other != "" && other != own {
				t.Errorf("%s imports %s: move what they share to platform/ (or define the interface in the consumer)", p.ImportPath, imp)
			}
		}
	}
	if seen < 6 {
		t.Fatalf("saw %d service packages, want at least controlplane, dispatcher, gateway, mcp, panel, realtime", seen)
	}
}
