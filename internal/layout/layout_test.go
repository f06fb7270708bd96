// Package layout holds the guard test of the repository's layout: domain
// packages never depend on Caddy. Only the adapters (caddymodule/ and its
// subfolders), the binary's main (cmd/), the end-to-end tests
// (integration/) and the benchmarks (bench/) may.
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// mayImportCaddy are the top-level folders whose packages may depend on
// Caddy. Every other package of the module is a domain package.
var mayImportCaddy = []string{"caddymodule", "cmd", "integration", "bench"}

// listed is what go list -json says of one package, test variants
// included.
type listed struct {
	ImportPath string
	ForTest    string   // the package under test, for a test variant
	Imports    []string // direct imports, as resolved (test variants named as such)
	Deps       []string // every transitive dependency
	Module     *struct{ Path string }
}

// isCaddy reports whether an import path is Caddy or one of its packages.
func isCaddy(p string) bool {
	return p == "github.com/caddyserver/caddy" || strings.HasPrefix(p, "github.com/caddyserver/caddy/")
}

// TestDomainPackagesDoNotDependOnCaddy lists every package of the module
// with its tests and fails for each domain package that depends on
// github.com/caddyserver/caddy, directly or not, naming the package and
// the chain of imports that reaches Caddy.
func TestDomainPackagesDoNotDependOnCaddy(t *testing.T) {
	root, modPath := module(t)
	pkgs := goList(t, root)
	byPath := map[string]listed{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}

	// For each package of ours: a chain of imports to Caddy from the
	// package itself, and from its tests (a test variant, "x [x.test]" or
	// "x_test [x.test]", belongs to the package under test).
	type finding struct{ pkg, tests []string }
	found := map[string]*finding{}
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != modPath || strings.HasSuffix(p.ImportPath, ".test") {
			continue // not ours, or a generated test main
		}
		owner := p.ImportPath
		if p.ForTest != "" {
			owner = p.ForTest
		}
		f := found[owner]
		if f == nil {
			f = new(finding)
			found[owner] = f
		}
		if slices.IndexFunc(p.Deps, isCaddy) < 0 {
			continue
		}
		switch {
		case p.ForTest == "" && f.pkg == nil:
			f.pkg = chain(byPath, p.ImportPath)
		case p.ForTest != "" && f.tests == nil:
			f.tests = chain(byPath, p.ImportPath)
		}
	}

	domain, adapters := 0, 0
	for _, owner := range slices.Sorted(maps.Keys(found)) {
		f := found[owner]
		rel := strings.TrimPrefix(strings.TrimPrefix(owner, modPath), "/")
		top, _, _ := strings.Cut(rel, "/")
		if slices.Contains(mayImportCaddy, top) {
			if f.pkg != nil {
				adapters++
			}
			continue
		}
		domain++
		switch {
		case f.pkg != nil:
			t.Errorf("domain package %s depends on Caddy: %s", owner, strings.Join(f.pkg, " -> "))
		case f.tests != nil:
			t.Errorf("domain package %s depends on Caddy in its tests: %s", owner, strings.Join(f.tests, " -> "))
		}
	}
	// The guard must see something to guard, and see Caddy where it is.
	if domain < 5 {
		t.Errorf("found %d domain packages: go list did not list the module", domain)
	}
	if adapters == 0 {
		t.Error("no package depends on Caddy, not even caddymodule: the check cannot see Caddy")
	}
}

// module returns the module's root directory and path.
func module(t *testing.T) (dir, modPath string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}\n{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v%s", err, stderr(err))
	}
	dir, modPath, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	return dir, modPath
}

// goList lists every package of the module and all of their dependencies,
// test variants included.
func goList(t *testing.T, root string) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-test", "-json=ImportPath,ForTest,Imports,Deps,Module", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v%s", err, stderr(err))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// chain is a shortest chain of imports from the package from to Caddy.
func chain(byPath map[string]listed, from string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if isCaddy(p) {
			var c []string
			for ; p != ""; p = prev[p] {
				name, _, _ := strings.Cut(p, " [") // "x [x.test]" reads as x
				c = append(c, name)
			}
			slices.Reverse(c)
			return c
		}
		for _, imp := range byPath[p].Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return []string{from, "(no chain found)"}
}

// stderr is a failed command's standard error, for the test's message.
func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}
