package dedupe

import (
	"errors"
	"fmt"
	"net/http"
)

// FinalClasses is the Config.Final of the status classes whose answers
// are recorded ("2xx", "3xx", "4xx": webhook_dedupe's record), or the
// error that refuses a class. A 5xx is never final: the sender must
// retry it. Nor are the statuses that ask for a retry whatever their
// class: a timeout (408), too early (425) and a rate limit (429).
func FinalClasses(classes []string) (func(status int) bool, error) {
	var final [6]bool
	for _, class := range classes {
		switch class {
		case "2xx", "3xx", "4xx":
			final[class[0]-'0'] = true
		case "5xx":
			return nil, errors.New("record 5xx: a server error is never final, the sender must retry it")
		default:
			return nil, fmt.Errorf("record %q: want status classes 2xx, 3xx or 4xx", class)
		}
	}
	return func(status int) bool {
		switch status {
		case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
			return false
		}
		return status >= 100 && status < 600 && final[status/100]
	}, nil
}

// MaxRecord is the largest response body recorded (Config.MaxRecord, or
// its default).
func (d *Deduper) MaxRecord() int64 { return int64(d.cfg.MaxRecord) }
