package caddymodule

import (
	"testing"
)

func TestParseSequence(t *testing.T) {
	for in, ok := range map[string]bool{"0": true, "42": true, "9007199254740991": true, "9007199254740992": false, "-1": false, "1.5": false, "": false, "07": true} {
		if _, err := parseSequence(in); (err == nil) != ok {
			t.Errorf("parseSequence(%q): err = %v, want ok=%v", in, err, ok)
		}
	}
}
