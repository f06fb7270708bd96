package cli

import "runtime/debug"

// Version is hookgate's version, from the build information: the module
// version when built as a dependency, else the VCS revision (and
// "+modified" for a dirty tree), else "(devel)".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	for _, dep := range bi.Deps {
		if dep.Path == modulePath {
			return dep.Version
		}
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "(devel)"
	}
	return rev + modified
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
	hookgate store check   check the embedded store's file

"hookgate help <command>" describes each. The Examples below, and the
help of Caddy's own commands, are Caddy's: read "caddy" as "hookgate".

To run the quickstart gateway:

	$ hookgate run --config caddyfiles/quickstart.Caddyfile

Documentation: README.md at https://github.com/hookgate/hookgate`
