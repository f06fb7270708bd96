package dedupe

import "testing"

// TestFinalClasses: the recorded classes are final, but for the statuses
// that ask for a retry; a 5xx class, or one that is no class, is refused.
func TestFinalClasses(t *testing.T) {
	final, err := FinalClasses([]string{"2xx", "4xx"})
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]bool{
		200: true, 204: true, 302: false, 400: true, 422: true,
		408: false, 425: false, 429: false, 500: false, 503: false, 0: false, 600: false,
	} {
		if got := final(status); got != want {
			t.Errorf("final(%d) = %v, want %v", status, got, want)
		}
	}
	for class, want := range map[string]string{
		"5xx": "record 5xx: a server error is never final, the sender must retry it",
		"2XX": `record "2XX": want status classes 2xx, 3xx or 4xx`,
		"1xx": `record "1xx": want status classes 2xx, 3xx or 4xx`,
	} {
		if _, err := FinalClasses([]string{"2xx", class}); err == nil || err.Error() != want {
			t.Errorf("FinalClasses(%s): %v, want %s", class, err, want)
		}
	}
}
