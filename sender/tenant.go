package sender

import (
	"fmt"
	"regexp"
	"strings"
)

// A tenant is a customer of the platform that runs hookgate: its
// destinations are its own, an event published for it reaches only them,
// and a door scoped to it (a portal link) sees nothing else. A tenant's
// destination is named <tenant>/<name> wherever hookgate names a
// destination (the queue, the history, metrics, the admin API), so that
// two tenants may each have an "orders"; a destination of no tenant has a
// name without a slash.

// tenantRE is a tenant's ID, as it goes in destination names, paths,
// metric labels and Redis keys.
var tenantRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckTenant refuses a tenant ID that is not 1 to 64 letters, digits,
// '.', '_' or '-', starting with a letter or digit.
func CheckTenant(tenant string) error {
	if !tenantRE.MatchString(tenant) {
		return fmt.Errorf("tenant %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", tenant)
	}
	return nil
}

// Qualify is the name of tenant's destination name: tenant/name, or name
// alone for no tenant.
func Qualify(tenant, name string) string {
	if tenant == "" {
		return name
	}
	return tenant + "/" + name
}

// TenantOf is the tenant a destination's name says: what comes before
// its slash, "" when it has none.
func TenantOf(dest string) string {
	t, _, ok := strings.Cut(dest, "/")
	if !ok {
		return ""
	}
	return t
}

// Scope confines a door handed to someone other than the operator (a
// console for one subscriber, a tenant's portal) to some destinations:
// one destination, a tenant's, or, when zero, every one.
type Scope struct {
	Destination string
	Tenant      string
}

// Sees reports whether dest is within s.
func (s Scope) Sees(dest string) bool {
	switch {
	case s.Destination != "":
		return dest == s.Destination
	case s.Tenant != "":
		return TenantOf(dest) == s.Tenant
	}
	return true
}

// IsZero reports whether s confines nothing.
func (s Scope) IsZero() bool { return s == Scope{} }

// inTenant keeps the destinations of dests that are tenant's; all of
// them when tenant is "".
func inTenant(dests []string, tenant string) []string {
	if tenant == "" {
		return dests
	}
	var out []string
	for _, d := range dests {
		if TenantOf(d) == tenant {
			out = append(out, d)
		}
	}
	return out
}
