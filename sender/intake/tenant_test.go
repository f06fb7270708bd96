package intake

import (
	"errors"
	"testing"

	"github.com/hookgate/hookgate/internal/problem"
)

// TestTenantRequired: a tenant placeholder that resolves to nothing is
// 400 bad_tenant, never the destinations of no tenant.
func TestTenantRequired(t *testing.T) {
	in := Inbound{Body: []byte(`{}`), ID: "e1", EventType: "seat.released", TenantRequired: true}
	var r *Refusal
	if _, err := in.Event(); !errors.As(err, &r) || r.Reason != problem.BadTenant {
		t.Fatalf("an empty tenant: %v", err)
	}
	in.Tenant = "acme"
	if ev, err := in.Event(); err != nil || ev.Tenant != "acme" {
		t.Fatalf("acme's: %+v %v", ev, err)
	}
}
