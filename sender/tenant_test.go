package sender_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/hookgate/hookgate/sender"
)

// TestTenants: two tenants each have an "orders"; an event published for
// one reaches its destinations only, one without a tenant only the
// destinations of none; the dead letters, the history and a redrive's
// record of one tenant are out of the other's reach.
func TestTenants(t *testing.T) {
	rcv := map[string]*receiver{}
	var dests []sender.Destination
	for _, name := range []string{"acme/orders", "globex/orders", "orders"} {
		rcv[name] = newReceiver(t, func(string, int) int { return 400 }) // dead at once
		dests = append(dests, sender.Destination{Name: name, URL: rcv[name].URL, Signer: signer(t), Events: []string{"seat.*"}})
	}
	q := newQueue(t).(sender.AuditedQueue)
	s, err := sender.New(q, fast, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	if got := s.Subscribers("seat.released", "acme"); !slices.Equal(got, []string{"acme/orders"}) {
		t.Fatalf(`Subscribers(seat.released, "acme") = %v`, got)
	}
	if got := s.Subscribers("seat.released", ""); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf(`Subscribers(seat.released, "") = %v`, got)
	}
	for _, ev := range []sender.Event{{ID: "e1", Tenant: "acme"}, {ID: "e2", Tenant: "globex"}, {ID: "e3"}, {ID: "e4", Tenant: "initech"}} {
		ev.EventType, ev.Payload = "seat.released", []byte(`{}`)
		res, err := s.Publish(t.Context(), &ev)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"e1": "acme/orders", "e2": "globex/orders", "e3": "orders"}[ev.ID]
		if got := len(res.Deliveries); (want == "" && got != 0) || (want != "" && (got != 1 || res.Deliveries[0].Destination != want)) {
			t.Errorf("publish %s for %q: %+v, want %q only", ev.ID, ev.Tenant, res.Deliveries, want)
		}
	}
	if _, err := s.Publish(t.Context(), &sender.Event{ID: "e5", EventType: "seat.released", Tenant: "a/b", Payload: []byte(`{}`)}); !errors.Is(err, sender.ErrBadTenant) {
		t.Errorf("a tenant with a slash: %v, want ErrBadTenant", err)
	}
	eventually(t, "each dead", func() bool {
		return rcv["acme/orders"].total.Load() == 1 && rcv["globex/orders"].total.Load() == 1 && rcv["orders"].total.Load() == 1
	})
	settled := sender.NewSettled(q, s.Destinations, 0, nil)
	eventually(t, "the dead letters settled", func() bool {
		n, _, err := settled.Count(t.Context(), sender.Filter{}, 10)
		return err == nil && n == 3
	})

	list, _, err := settled.List(t.Context(), sender.Filter{Tenant: "acme"}, 10, "")
	if err != nil || len(list) != 1 || list[0].Destination != "acme/orders" {
		t.Fatalf("acme's dead letters: %v, %v", list, err)
	}
	if _, _, err := settled.List(t.Context(), sender.Filter{Tenant: "acme", Destination: "globex/orders"}, 10, ""); !errors.Is(err, sender.ErrBadFilter) {
		t.Errorf("acme's filter naming globex's destination: %v, want ErrBadFilter", err)
	}
	hist, _, err := settled.History(t.Context(), sender.HistoryQuery{Tenant: "globex"}, "", 10)
	if err != nil || len(hist) != 1 || hist[0].Destination != "globex/orders" {
		t.Fatalf("globex's history: %v, %v", hist, err)
	}
	if _, _, err := settled.History(t.Context(), sender.HistoryQuery{Tenant: "globex", Destination: "acme/orders"}, "", 10); !errors.Is(err, sender.ErrUnknownDestination) {
		t.Errorf("globex's history naming acme's destination: %v, want ErrUnknownDestination", err)
	}
	if _, _, err := settled.Delivery(t.Context(), "acme/orders", "e1"); err != nil {
		t.Fatal(err)
	}

	// A redrive of acme's is acme's to follow, not globex's.
	rd, err := settled.Redrive(t.Context(), sender.Filter{Tenant: "acme"}, 10, "portal", true)
	if err != nil || rd.Matched != 1 {
		t.Fatalf("acme's redrive dry run: %+v, %v", rd, err)
	}
	rd, err = settled.Redrive(t.Context(), sender.Filter{Tenant: "acme"}, 10, "portal", false)
	if err != nil || rd.Moved != 1 || rd.Letters[0].Destination != "acme/orders" {
		t.Fatalf("acme's redrive: %+v, %v", rd, err)
	}
	if _, err := settled.Progress(t.Context(), rd.ID, sender.Scope{Tenant: "acme"}); err != nil {
		t.Errorf("acme follows its redrive: %v", err)
	}
	for _, scope := range []sender.Scope{{Tenant: "globex"}, {Destination: "globex/orders"}, {Destination: "orders"}} {
		if _, err := settled.Progress(t.Context(), rd.ID, scope); !errors.Is(err, sender.ErrNotFound) {
			t.Errorf("%+v follows acme's redrive: %v, want ErrNotFound", scope, err)
		}
	}
}

func TestCheckDestinationsNames(t *testing.T) {
	for name, ok := range map[string]bool{"orders": true, "acme/orders": true, "a/b/c": false, "/orders": false, "acme/": false} {
		err := sender.CheckDestinations([]sender.Destination{{Name: name, URL: "https://example.com/"}})
		if (err == nil) != ok {
			t.Errorf("%q: %v", name, err)
		}
	}
	if sender.TenantOf("acme/orders") != "acme" || sender.TenantOf("orders") != "" || sender.Qualify("", "x") != "x" || sender.Qualify("t", "x") != "t/x" {
		t.Error("TenantOf or Qualify")
	}
}
