package caddymodule

import (
	"expvar"
	"os"
)

// PIDVar is the variable of Caddy's /debug/vars (on the admin endpoint)
// that holds the gateway's process ID: `hookgate stop` reads it, so that
// it can wait for the process to exit.
const PIDVar = "hookgate_pid"

func init() {
	expvar.Publish(PIDVar, expvar.Func(func() any { return os.Getpid() }))
}
