package layout

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeMaxLines bounds the README: what hookgate is, the set-up, the
// walk-through and the map of docs/; the manual is in docs/.
const readmeMaxLines = 400

// TestREADMELength: the README stays a door, not the manual.
func TestREADMELength(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, over %d: move the new text to its page in docs/", n, readmeMaxLines)
	}
}

// TestREADMEMapsTheManual: a reader of the README alone finds where the
// sender's retry policy lives (its code and its doc section) and where
// the Redis key schemas are documented. TestDocLinks checks that the
// links resolve.
func TestREADMEMapsTheManual(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"(sender/policy.go)", "(docs/sending.md#failure-classes)", "(docs/architecture.md#redis-key-schemas)"} {
		if !strings.Contains(string(b), link) {
			t.Errorf("README.md's map does not link %s", link)
		}
	}
}

// TestDocLinks: every relative link of README.md and docs/*.md names a
// file or directory of the repository, and every #anchor a heading of
// the page it points into (or of its own page).
func TestDocLinks(t *testing.T) {
	pages := manualPages(t)
	anchors := map[string][]string{} // page (from the root) -> its anchors
	for _, p := range pages {
		anchors[p] = headingAnchors(t, p)
	}
	checked := 0
	for _, p := range pages {
		for _, l := range pageLinks(t, p) {
			checked++
			if err := checkLink(p, l.target, anchors); err != nil {
				t.Errorf("%s:%d: link %q: %v", p, l.line, l.target, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no link in README.md and docs/*.md: has the link syntax changed?")
	}
}

// TestHelpNamesDocSections: the commands' help texts that send the reader
// to a page of the manual ("Documentation: docs/sending.md, "Dead
// letters"") name a page that exists and a heading it has.
func TestHelpNamesDocSections(t *testing.T) {
	files, err := filepath.Glob("../../caddymodule/cli/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go file in caddymodule/cli: %v", err)
	}
	ref := regexp.MustCompile(`\b((?:docs/[a-z0-9-]+|README)\.md), "([^"]+)"`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			found++
			page, section := m[1], m[2]
			if _, err := os.Stat(filepath.Join("../..", page)); err != nil {
				t.Errorf("%s: the help names %s, which does not exist", f, page)
				continue
			}
			if !slices.ContainsFunc(headings(t, page), func(h string) bool { return strings.HasPrefix(h, section) }) {
				t.Errorf("%s: the help names %s, %q: no heading of %s starts so", f, page, section, page)
			}
		}
	}
	if found == 0 {
		t.Fatal("no help text of caddymodule/cli names a page of the manual: has the form changed?")
	}
}

// manualPages are README.md and docs/*.md, from the repository's root.
func manualPages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no page in docs/: %v", err)
	}
	pages := []string{"README.md"}
	for _, d := range docs {
		pages = append(pages, strings.TrimPrefix(filepath.ToSlash(d), "../../"))
	}
	return pages
}

// prose yields each line of a page outside fenced code blocks, with its
// number, and with inline code spans removed: a link in either is text.
func prose(t *testing.T, page string) func(yield func(int, string) bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", page))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`[^`]*`")
	return func(yield func(int, string) bool) {
		fenced := false
		n := 0
		for line := range strings.Lines(string(b)) {
			n++
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			if !yield(n, code.ReplaceAllString(strings.TrimRight(line, "\n"), "")) {
				return
			}
		}
	}
}

var headingLine = regexp.MustCompile(`^#{1,6} +(.+?) *#*$`)

// headings are the texts of a page's headings, as written.
func headings(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if m := headingLine.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil && !fenced {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a page's headings: the text
// lower-cased, without punctuation (backquotes, colons, commas,
// apostrophes), spaces as hyphens; a repeated one gets -1, -2.
func headingAnchors(t *testing.T, page string) []string {
	t.Helper()
	drop := regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc} -]`)
	seen := map[string]int{}
	var out []string
	for _, h := range headings(t, page) {
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

type link struct {
	line   int
	target string
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]*)(?:\s+"[^"]*")?\)`)

// pageLinks are the inline links and images of a page, outside code.
func pageLinks(t *testing.T, page string) []link {
	t.Helper()
	var out []link
	for n, line := range prose(t, page) {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{n, m[1]})
		}
	}
	return out
}

var scheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

// checkLink resolves a link of page: a URL with a scheme is not ours to
// check; a path must exist in the repository, and an anchor must be a
// heading of the page it names.
func checkLink(page, target string, anchors map[string][]string) error {
	if scheme.MatchString(target) {
		return nil
	}
	if target == "" {
		return fmt.Errorf("empty")
	}
	path, anchor, hasAnchor := strings.Cut(target, "#")
	dest := page
	if path != "" {
		dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), path)))
		if strings.HasPrefix(dest, "../") || filepath.IsAbs(path) {
			return fmt.Errorf("leaves the repository")
		}
		if _, err := os.Stat(filepath.Join("../..", dest)); err != nil {
			return fmt.Errorf("%s does not exist", dest)
		}
	}
	if !hasAnchor {
		return nil
	}
	known, ok := anchors[dest]
	if !ok {
		return fmt.Errorf("an anchor into %s, which is not a page of the manual", dest)
	}
	if !slices.Contains(known, anchor) {
		return fmt.Errorf("%s has no heading with the anchor #%s", dest, anchor)
	}
	return nil
}
