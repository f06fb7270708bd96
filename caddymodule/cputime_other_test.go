//go:build !linux

package caddymodule

import (
	"testing"
	"time"
)

var benchStart = time.Now()

// threadCPU falls back to the wall clock where the thread's CPU clock is
// not at hand: the ratios are then only as good as the machine is quiet.
func threadCPU(*testing.B) time.Duration { return time.Since(benchStart) }
