package pathseg

import (
	"strings"
	"testing"
)

// TestRoundTrip: every ID Escape writes reads back as it was, and none of
// the segments is a dot segment, escaped or not, that a browser or a
// server would resolve away.
func TestRoundTrip(t *testing.T) {
	for _, id := range []string{".", "..", "...", "a/b", "./x", "%2E", "%2e%2E", "%20.", "%20..", "~", "summary"} {
		seg := Escape(id)
		if strings.Contains(seg, "/") {
			t.Errorf("Escape(%q) = %q holds a slash", id, seg)
		}
		if dots := strings.ReplaceAll(strings.ToLower(seg), "%2e", "."); dots == "." || dots == ".." {
			t.Errorf("Escape(%q) = %q is a dot segment", id, seg)
		}
		if got, err := Unescape(seg); err != nil || got != id {
			t.Errorf("Unescape(Escape(%q)) = %q, %v", id, got, err)
		}
	}
	if _, err := Unescape("%zz"); err == nil {
		t.Error("Unescape(%zz): no error")
	}
}
