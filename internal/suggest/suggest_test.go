package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"secret", "secret", 0},
		{"secrets", "secret", 1},
		{"sceret", "secret", 1}, // a transposition
		{"webhook_dedup", "webhook_dedupe", 1},
		{"kitten", "sitting", 3},
		{"", "abc", 3},
		{"ça", "ca", 1}, // runes, not bytes
	} {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := distance(tt.b, tt.a); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"scheme", "secret", "tolerance", "max_body", "hmac"}
	for _, tt := range []struct{ word, want string }{
		{"secrets", "secret"},
		{"shceme", "scheme"},
		{"tolerence", "tolerance"},
		{"max-body", "max_body"},
		{"hmca", "hmac"},
		{"key", ""},     // nothing near
		{"x", ""},       // too short to guess
		{"timeout", ""}, // a real word of another block
		{"secret", "secret"},
	} {
		if got := Closest(tt.word, known); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
}
