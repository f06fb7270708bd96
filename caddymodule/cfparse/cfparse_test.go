package cfparse

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// parse runs Directive over src with a block of every argument kind.
func parse(src string) (got struct {
	arg, s string
	list   []string
	flag   bool
	n      int
	dur    caddy.Duration
	size   int64
}, err error) {
	d := caddyfile.NewTestDispenser(src)
	err = Directive(d, &got.arg, "thing", Block{
		{"name", String(&got.s)},
		{"names", List(&got.list)},
		{"on", Flag(&got.flag)},
		{"count", Int(&got.n)},
		{"wait", Duration(&got.dur)},
		{"max", Size(&got.size)},
	}, "names")
	return got, err
}

func TestDirective(t *testing.T) {
	got, err := parse("thing a {\n name x\n names p q\n names r\n on\n count 3\n wait 2s\n max 1KiB\n}")
	if err != nil {
		t.Fatal(err)
	}
	if got.arg != "a" || got.s != "x" || strings.Join(got.list, ",") != "r" || !got.flag || got.n != 3 ||
		got.dur != caddy.Duration(2e9) || got.size != 1024 {
		t.Errorf("parsed %+v", got)
	}
	for src, want := range map[string]string{
		"thing a b":                    "wrong argument count",
		"thing {\n nmae x\n}":          `unknown thing subdirective "nmae"; did you mean "name"?`,
		"thing {\n zzz\n}":             "want one of name, names, on, count, wait, max",
		"thing {\n name x\n name y\n}": "name given twice",
		"thing {\n on off\n}":          "wrong argument count",
		"thing {\n count 0\n}":         "want a positive whole number",
		"thing {\n wait -1s\n}":        "want a positive duration",
		"thing {\n max 0\n}":           "between 1 byte and 1TiB",
		"thing {\n names\n}":           "wrong argument count",
	} {
		if _, err := parse(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", src, err, want)
		}
	}
}
