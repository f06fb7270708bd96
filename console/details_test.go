package console

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestCountsAgree: a count of one reads in the singular.
func TestCountsAgree(t *testing.T) {
	f := newFake()
	delete(f.dead, "a/x/y")
	delete(f.dead, "a/<b>")
	c := newConsole(t, f)
	for _, tt := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"destination": {"a"}, "limit": {"5"}}, `id="matched">1</b> dead letter matches`},
		{url.Values{"destination": {"b"}, "limit": {"5"}}, `id="matched">3</b> dead letters match`},
	} {
		w := request(c, View{Base: "/c"}, "POST", "/redrive", tt.form)
		if w.Code != 200 || !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("preview of %v: %d, want %q in\n%s", tt.form, w.Code, tt.want, w.Body.String())
		}
	}
}

// TestSincePlaceholderIsNoDate: the "Dead since" field's example is not
// Go's reference time, which reads as a real date.
func TestSincePlaceholderIsNoDate(t *testing.T) {
	c := newConsole(t, newFake())
	w := request(c, View{Base: "/c"}, "GET", "/dead", nil)
	m := regexp.MustCompile(`name="since"[^>]*placeholder="([^"]*)"`).FindStringSubmatch(w.Body.String())
	if w.Code != 200 || m == nil {
		t.Fatalf("GET /dead: %d, no since field with a placeholder:\n%s", w.Code, w.Body.String())
	}
	if strings.Contains(m[1], "2006") || strings.Contains(m[1], "15:04:05") || strings.Contains(m[1], "01-02") {
		t.Errorf("the since placeholder is %q: Go's reference time", m[1])
	}
}

// TestEmptyQueueHasNoOldest: a destination with nothing due shows "–" as
// its oldest ready envelope, not an age.
func TestEmptyQueueHasNoOldest(t *testing.T) {
	c := newConsole(t, newFake())
	w := request(c, View{Base: "/c"}, "GET", "/", nil)
	row := regexp.MustCompile(`(?s)<tr[^>]*>\s*<td[^>]*>(?:<a[^>]*>)?a<.*?</tr>`).FindString(w.Body.String())
	if w.Code != 200 || row == "" {
		t.Fatalf("GET /: %d, no row for destination a:\n%s", w.Code, w.Body.String())
	}
	if !strings.Contains(row, `<td class="num">–</td>`) || strings.Contains(row, ">0s<") {
		t.Errorf("destination a, nothing due: its row shows no –, or an age:\n%s", row)
	}
}
