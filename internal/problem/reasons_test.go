package problem

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"regexp"
	"testing"
)

// TestReasonsAreWhole: every Reason declared in reasons.go is in Reasons,
// once, and each code is a distinct snake_case word with a real status.
func TestReasonsAreWhole(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for _, v := range vs.Values {
				if cl, ok := v.(*ast.CompositeLit); ok {
					if id, ok := cl.Type.(*ast.Ident); ok && id.Name == "Reason" {
						declared++
					}
				}
			}
		}
		return true
	})
	if declared != len(Reasons) {
		t.Errorf("reasons.go declares %d reasons, Reasons lists %d: list each once", declared, len(Reasons))
	}
	snake := regexp.MustCompile(`^[a-z]+(_[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, r := range Reasons {
		if seen[r.Code] {
			t.Errorf("%q is listed twice", r.Code)
		}
		seen[r.Code] = true
		if !snake.MatchString(r.Code) {
			t.Errorf("%q is not a snake_case code", r.Code)
		}
		if r.Status < 400 || r.Status > 599 || http.StatusText(r.Status) == "" {
			t.Errorf("%s: status %d is not an error status", r.Code, r.Status)
		}
	}
}
