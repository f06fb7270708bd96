// Package eventtime reads an event's time as producers write it: RFC 3339,
// or unix seconds (an integer or a decimal).
package eventtime

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
)

// maxUnixSeconds is 9999-12-31T23:59:59Z, the last time RFC 3339 can write.
const maxUnixSeconds = 253402300799

// Parse parses RFC 3339 or unix seconds (an integer or a decimal). Its
// error quotes at most 40 bytes of s.
func Parse(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > maxUnixSeconds || math.IsNaN(f) || strings.ContainsAny(s, "eExXpP_") {
		return time.Time{}, fmt.Errorf("event time %q is neither RFC 3339 nor unix seconds", problem.Truncate(s, 40))
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}
