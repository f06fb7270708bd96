package sender_test

import (
	"fmt"
	"testing"

	"github.com/hookgate/hookgate/sender"
)

// BenchmarkSubscribers routes one event over 10,000 destinations: of no
// tenant (the baseline), and spread over 1,000 tenants (the tenant's 10
// match). Routing by tenant reads each name's tenant: compare the two.
func BenchmarkSubscribers(b *testing.B) {
	for _, tc := range []struct {
		name    string
		tenants int
		tenant  string
	}{{"no tenant", 0, ""}, {"1000 tenants", 1000, "t7"}} {
		b.Run(tc.name, func(b *testing.B) {
			dests := make([]sender.Destination, 10000)
			for i := range dests {
				name := fmt.Sprintf("d%05d", i)
				if tc.tenants > 0 {
					name = fmt.Sprintf("t%d/d%05d", i%tc.tenants, i)
				}
				dests[i] = sender.Destination{Name: name, URL: "https://x.example/", Events: []string{"seat.*"}}
			}
			s, err := sender.New(newQueue(b), fast, dests, sender.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if n := len(s.Subscribers("seat.released", tc.tenant)); n == 0 {
					b.Fatal("no subscriber")
				}
			}
		})
	}
}
