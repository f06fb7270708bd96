package caddymodule

import (
	"slices"
	"sync"
)

// running holds the hookgate apps that are started, in the order they
// started; the newest is the one the admin API serves.
//
// The admin module cannot find its app through the context it was
// provisioned with. On a config load Caddy swaps in the new admin endpoint
// (a new admin.api.hookgate, provisioned with the new config's context)
// before the new config's apps load; when the load is refused (a
// provisioning error, or an app that fails to start) the old config keeps
// running, and the new admin endpoint stays. On a load that succeeds, the
// new config's apps start before the old ones stop, so two apps are
// briefly started at once.
var running struct {
	sync.Mutex
	apps []*App
}

// setRunning records a as started.
func setRunning(a *App) {
	running.Lock()
	defer running.Unlock()
	running.apps = append(running.apps, a)
}

// unsetRunning records a as stopped: the app started before it, if still
// running, is served again (a load refused after a started).
func unsetRunning(a *App) {
	running.Lock()
	defer running.Unlock()
	running.apps = slices.DeleteFunc(running.apps, func(b *App) bool { return b == a })
}

// runningApp is the newest started hookgate app, nil when none runs.
func runningApp() *App {
	running.Lock()
	defer running.Unlock()
	if len(running.apps) == 0 {
		return nil
	}
	return running.apps[len(running.apps)-1]
}
