package caddymodule

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// domainReasons are the reason codes the manual names that a domain
// package writes, not caddymodule: each with the package (from the
// repository's root) whose source holds it. caddymodule passes them
// through: the admin API and webhook_enqueue answer with sender/httpapi
// and dedupe/httpapi,
// webhook_console with console, dedupe's and freshness's forwards with
// internal/forward; the stale answers are dedupe's judgements.
var domainReasons = map[string]string{
	"bad_verify_token":             "verify", // the handshakes' refusals
	"bad_crc_token":                "verify",
	"origin_not_allowed":           "verify",
	"superseded":                   "dedupe", // dedupe.ResultSuperseded
	"too_old":                      "dedupe", // dedupe.ResultTooOld
	"upstream_response_incomplete": "internal/forward",
	"upstream_timeout":             "internal/forward",
	"bad_request":                  "dedupe/httpapi",
	"not_found":                    "dedupe/httpapi",
	"unknown_destination":          "sender/httpapi",
	"bad_limit":                    "sender/httpapi",
	"filter_required":              "sender/httpapi",
	"no_sender":                    "sender/httpapi",
	"destination_orphaned":         "sender/httpapi",
	"destination_configured":       "sender/httpapi",
	"empty_payload":                "sender/httpapi", // webhook_enqueue's, as httpapi.Inbound reads it
	"malformed_json":               "sender/httpapi",
	"bad_id":                       "sender/httpapi",
	"missing_event_type":           "sender/httpapi", // a fan-out's, webhook_enqueue's and POST /hookgate/events'
	"csrf_token_invalid":           "console",
	"cross_origin_request":         "console",
	"confirm_token_missing":        "console",
	"confirm_token_stale":          "console",
	"confirm_token_mismatch":       "console",
	"redrive_in_progress":          "console",
	"resume_not_allowed":           "console",
	"redrive_incomplete":           "console",
	"store_not_file":               "internal/store", // GET /hookgate/store/backup on Redis
}

// TestReasonsInREADME holds reasons.go and the manual (README.md and
// docs/*.md) to each other: every reason code caddymodule writes is
// documented, and every code the manual documents is written by
// caddymodule or listed in domainReasons.
func TestReasonsInREADME(t *testing.T) {
	t.Parallel()
	ours := reasonConstants(t)
	documented := docReasons(t, manualFiles(t)...)

	for _, code := range slices.Sorted(maps.Keys(ours)) {
		if _, ok := documented[code]; !ok {
			t.Errorf("%s = %q (reasons.go) is not in the manual: give it a row in a reason table of docs/ or the troubleshooting table of docs/operations.md (a status, then the code in backquotes)", ours[code], code)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := ours[code]; ok {
			continue
		}
		if _, ok := domainReasons[code]; !ok {
			t.Errorf("%s names reason %q, which is neither a constant in reasons.go nor in domainReasons with the package that writes it", documented[code], code)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(domainReasons)) {
		pkg := domainReasons[code]
		if _, ok := ours[code]; ok {
			t.Errorf("domainReasons lists %q, which reasons.go holds too: drop it from domainReasons", code)
		}
		if _, ok := documented[code]; !ok {
			t.Errorf("domainReasons lists %q, which the manual does not name: drop it, or document it", code)
		}
		if !sourceHolds(t, filepath.Join("..", pkg), strconv.Quote(code)) {
			t.Errorf("domainReasons says %s writes %q, but no Go file of %s holds it", pkg, code, pkg)
		}
	}
}

// TestReasonsAreConstants: no problem.Write or httpapi.Errorf of
// caddymodule spells its reason as a string literal.
func TestReasonsAreConstants(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	for _, file := range goFiles(t, ".") {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			arg := -1
			switch pkg.Name + "." + sel.Sel.Name {
			case "problem.Write":
				arg = 2
			case "httpapi.Errorf":
				arg = 1
			}
			if arg >= 0 && arg < len(call.Args) {
				if lit, ok := call.Args[arg].(*ast.BasicLit); ok {
					t.Errorf("%s: reason %s is a literal: add it to reasons.go and use the constant", fset.Position(lit.Pos()), lit.Value)
				}
			}
			return true
		})
	}
}

// reasonConstants returns the reason constants of reasons.go: code -> name.
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || !strings.HasPrefix(name.Name, "reason") {
					t.Fatalf("reasons.go: %s: want reasonXxx = \"code\"", name.Name)
				}
				code, _ := strconv.Unquote(lit.Value)
				if other, dup := out[code]; dup {
					t.Errorf("reasons.go: %s and %s are both %q", other, name.Name, code)
				}
				out[code] = name.Name
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("reasons.go holds no reason constant")
	}
	return out
}

// readmeCode is a reason code in backquotes.
const readmeCode = "`([a-z][a-z0-9_]*)`"

var (
	// readmeReasonTable starts a table whose last column is the reason.
	readmeReasonTable = regexp.MustCompile("^\\| case \\| status \\| `reason` \\|$")
	// readmeStatusCodes is a status followed by a code, then maybe more
	// codes after "/" or "or": 400 `missing_entity` / `missing_event_time`.
	readmeStatusCodes = regexp.MustCompile(`\b[1-5]\d\d\s+` + readmeCode + `((?:\s*(?:/|or)\s*` + readmeCode + `)*)`)
	// readmeReasonWord is "reason `superseded` or `too_old`".
	readmeReasonWord = regexp.MustCompile(`\breason\s+` + readmeCode + `((?:\s*(?:/|or)\s*` + readmeCode + `)*)`)
	readmeCodes      = regexp.MustCompile(readmeCode)
	readmeAsides     = regexp.MustCompile(`\([^()]*\)`)
)

// manualFiles are the pages of the manual: README.md, then docs/*.md.
func manualFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no page in ../docs: %v", err)
	}
	return append([]string{filepath.Join("..", "README.md")}, docs...)
}

// docReasons returns the reason codes the pages document, each with the
// page and line where it first does ("../docs/operations.md:12").
func docReasons(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range paths {
		for code, line := range readmeReasons(t, path) {
			if _, ok := out[code]; !ok {
				out[code] = fmt.Sprintf("%s:%d", path, line)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%v: found no reason code: has the reason tables' header changed?", paths)
	}
	return out
}

// readmeReasons returns the reason codes one page documents, each with
// the line where it first does: the last column of the reason tables, a
// code after a status ("answers 409 `in_flight`", the troubleshooting
// rows) or after "reason", and the list after "reason code:" (the
// console's refusals). A page may document none.
func readmeReasons(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	out := map[string]int{}
	add := func(offset int, s string) {
		line := strings.Count(text[:offset], "\n") + 1
		for _, m := range readmeCodes.FindAllStringSubmatch(s, -1) {
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = line
			}
		}
	}

	offset, inTable := 0, false
	for line := range strings.Lines(text) {
		row := strings.TrimSpace(line)
		switch {
		case readmeReasonTable.MatchString(row):
			inTable = true
		case inTable && strings.HasPrefix(row, "|"):
			cells := strings.Split(strings.Trim(row, "|"), "|")
			add(offset, cells[len(cells)-1])
		default:
			inTable = false
		}
		offset += len(line)
	}
	for _, re := range []*regexp.Regexp{readmeStatusCodes, readmeReasonWord} {
		for _, m := range re.FindAllStringIndex(text, -1) {
			add(m[0], text[m[0]:m[1]])
		}
	}
	for i := 0; ; {
		j := strings.Index(text[i:], "reason code:")
		if j < 0 {
			break
		}
		i += j
		// The list runs to the end of its sentence; the asides in
		// parentheses name other things (filters, options).
		list := readmeAsides.ReplaceAllString(text[i:], "")
		if end := strings.Index(list, ".\n"); end >= 0 {
			list = list[:end]
		}
		add(i, list)
		i += len("reason code:")
	}
	return out
}

// sourceHolds reports whether a non-test Go file of dir holds s.
func sourceHolds(t *testing.T, dir, s string) bool {
	t.Helper()
	for _, file := range goFiles(t, dir) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// goFiles lists the non-test Go files of dir.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go file in %s: %v", dir, err)
	}
	out := files[:0]
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			out = append(out, f)
		}
	}
	return out
}
