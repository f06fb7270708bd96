package layout

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulesOf are the modules, other than this one, that go list finds
// the packages of args in.
func modulesOf(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var mods []string
	for _, m := range strings.Fields(string(out)) {
		if m != "github.com/hookgate/hookgate" {
			mods = append(mods, m)
		}
	}
	slices.Sort(mods)
	return slices.Compact(mods)
}

// TestREADMEModuleCounts: the Set-up's counts of what a first run
// downloads are go list's: the modules the binary is built from, and the
// modules only the tests need (the download that makes command 2 quiet
// before it prints anything).
func TestREADMEModuleCounts(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	count := func(re string) int {
		t.Helper()
		m := regexp.MustCompile(re).FindSubmatch(readme)
		if m == nil {
			t.Fatalf("README.md says nothing that matches %s", re)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	build := len(modulesOf(t, "./cmd/hookgate"))
	tests := len(modulesOf(t, "-test", "./...")) - build
	if got := count(`first .go run. downloads (\d+) modules`); got != build {
		t.Errorf("README.md: the first go run downloads %d modules; go list says %d", got, build)
	}
	if got := count(`downloads the (\d+) modules\s+only the tests need`); got != tests {
		t.Errorf("README.md: command 2 downloads %d modules only the tests need; go list says %d", got, tests)
	}
}
