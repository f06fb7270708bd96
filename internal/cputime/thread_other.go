//go:build !linux

package cputime

import (
	"testing"
	"time"
)

var start = time.Now()

// Thread falls back to the wall clock where the thread's CPU clock is not
// at hand: the ratios are then only as good as the machine is quiet.
func Thread(testing.TB) time.Duration { return time.Since(start) }
