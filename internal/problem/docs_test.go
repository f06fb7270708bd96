package problem

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReasonsInTheManual holds the registry (reasons.go) and the manual
// (README.md and docs/*.md) to each other: every reason hookgate writes
// is documented, with its status, and every code the manual documents is
// in the registry. A writer can name no other: Write takes a Reason.
func TestReasonsInTheManual(t *testing.T) {
	t.Parallel()
	documented := docReasons(t, manualFiles(t)...)
	ours := map[string]bool{}
	for _, r := range Reasons {
		ours[r.Code] = true
		if _, ok := documented[r.Code]; !ok {
			t.Errorf("%q (reasons.go) is not in the manual: give it a row in a reason table of docs/ or the troubleshooting table of docs/operations.md (a status, then the code in backquotes)", r.Code)
		}
	}
	for code, where := range documented {
		if !ours[code] {
			t.Errorf("%s names reason %q, which the registry (reasons.go) does not hold", where, code)
		}
	}
	// Where the manual gives a status before a code, it is the code's.
	status := map[string]int{}
	for _, r := range Reasons {
		status[r.Code] = r.Status
	}
	for _, path := range manualFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range readmeStatusCode.FindAllStringSubmatch(string(b), -1) {
			n, _ := strconv.Atoi(m[1]) // three digits, by the pattern
			if want, ok := status[m[2]]; ok && n != want && n != 200 {
				t.Errorf("%s: %d `%s`, but the registry answers it with %d", path, n, m[2], want)
			}
		}
	}
}

// readmeStatusCode is one status and the code right after it.
var readmeStatusCode = regexp.MustCompile(`\b([1-5]\d\d)\s+` + "`([a-z][a-z0-9_]*)`")

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
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no page in ../../docs: %v", err)
	}
	return append([]string{filepath.Join("..", "..", "README.md")}, docs...)
}

// docReasons returns the reason codes the pages document, each with the
// page and line where it first does ("../../docs/operations.md:12").
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
