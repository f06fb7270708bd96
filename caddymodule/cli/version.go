package cli

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"
)

// Version is hookgate's version, from the build information: the module
// version (a release, or the pseudo-version Go gives a build in a git
// clone), and the commit, its time and "modified" for a dirty tree, as
// far as they were recorded.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: no build information)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	var version string
	if bi.Main.Path == modulePath && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	for _, dep := range bi.Deps {
		if dep.Path == modulePath {
			version = dep.Version
		}
	}
	var vcs []string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			vcs = append([]string{"commit " + s.Value[:min(12, len(s.Value))]}, vcs...)
		case s.Key == "vcs.time":
			vcs = append(vcs, s.Value)
		case s.Key == "vcs.modified" && s.Value == "true":
			vcs = append(vcs, "modified")
		}
	}
	switch {
	case version == "" && len(vcs) == 0:
		return "(devel: no version or commit recorded; build with go build in a git clone, without -buildvcs=false (check GOFLAGS: go env GOFLAGS), or go install ...@<version>)"
	case version == "":
		return strings.Join(vcs, ", ")
	case len(vcs) == 0:
		return version
	}
	return version + " (" + strings.Join(vcs, ", ") + ")"
}

// caddyVersion is the version of the Caddy hookgate is built on.
func caddyVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == caddy.ImportPath {
				return dep.Version
			}
		}
	}
	return "(unknown)"
}

// versionText is what `hookgate version` and `hookgate --version` print.
func versionText() string {
	return "hookgate " + Version() + " on Caddy " + caddyVersion()
}

// versionCommand is hookgate's version command, in the place of Caddy's,
// which prints Caddy's version.
func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Prints hookgate's version, and Caddy's",
		Long: `
Prints hookgate's version: its module version (a release, or the
pseudo-version Go records for a build in a git clone), and the commit, its
time and whether the tree was modified, when the build recorded them; then
the version of Caddy it is built on.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			fmt.Fprintln(cmd.OutOrStdout(), versionText())
			return 0, nil
		}),
	}
}

const modulePath = "github.com/hookgate/hookgate"

// LongDescription is the hookgate command's help text.
const LongDescription = `hookgate is a webhook reliability layer at the edge, built on Caddy.

As a receiver's gateway, its HTTP handlers verify webhook signatures
(webhook_verify), forward each delivery once and replay its outcome to
duplicates (webhook_dedupe), and answer stale events without forwarding
them (webhook_freshness). As a sender, it delivers your own events from a
durable queue with retries, circuit breakers and a dead-letter queue
(webhook_enqueue, hookgate dlq, hookgate deliveries, hookgate
destinations).

hookgate is a full Caddy: run, start, stop, reload, adapt, validate and
list-modules behave as Caddy's. Its own commands:

	hookgate sign          sign a webhook body (and send it) as a sender would
	hookgate dedupe        show or forget what the gateway remembers of a delivery
	hookgate freshness     show an entity's freshness watermark and lease
	hookgate dlq           inspect, redrive and purge dead letters
	hookgate deliveries    search, export and resend the delivery history
	hookgate destinations  list, pause and resume the sender's destinations
	hookgate reconcile     compare a source of truth with a receiver, report and repair drift
	hookgate store         check the embedded store's file (store check), or back up
	                       a running gateway's (store backup)

"hookgate help <command>" describes each. Caddy's upgrade, add-package and
remove-package would replace hookgate with a plain Caddy: here they refuse,
and say how to build hookgate with other modules.

To run the quickstart gateway:

	$ hookgate run --config caddyfiles/quickstart.Caddyfile

Documentation: README.md at https://github.com/hookgate/hookgate`
