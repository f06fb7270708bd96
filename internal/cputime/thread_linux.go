package cputime

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Thread is the CPU time the calling thread has used: unlike the wall
// clock, it does not count the time other processes hold the cores. The
// caller keeps to its thread between two readings (a benchmark's
// goroutine locked to its thread, or with no blocking call between).
func Thread(tb testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
