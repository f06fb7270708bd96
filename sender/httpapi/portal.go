package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/portal"
	"github.com/hookgate/hookgate/sender"
)

// PortalLinkRequest is the body of POST /hookgate/portal-links: the
// tenant, and how long the link lasts (a Go duration: 1h, 30m; default
// 1h, at most 720h).
type PortalLinkRequest struct {
	Tenant string `json:"tenant"`
	TTL    string `json:"ttl,omitempty"`
}

// issuePortalLink serves POST /hookgate/portal-links: {"url","expires_at"}
// of a link to the tenant's console. A tenant that no destination (nor
// an orphan's envelopes) carries is 404 unknown_tenant: a link to an
// empty portal is a typo's.
func (h *Handler) issuePortalLink(w http.ResponseWriter, r *http.Request) error {
	in, err := h.portalRequest(r)
	if err != nil {
		return err
	}
	var ttl time.Duration
	if in.TTL != "" {
		if ttl, err = time.ParseDuration(in.TTL); err != nil {
			return Errorf(problem.BadRequest, "ttl %q: want a duration, e.g. 1h or 30m", in.TTL)
		}
	}
	dests, err := h.ops.Destinations(r.Context())
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(dests, func(d sender.DestinationStatus) bool { return d.Tenant == in.Tenant }) {
		return Errorf(problem.UnknownTenant, "no destination is tenant %q's: create one first (POST /hookgate/destinations with tenant)", in.Tenant)
	}
	link, err := h.links.Issue(r.Context(), in.Tenant, ttl)
	if err != nil {
		return portalError(err)
	}
	h.logger.Info("portal link issued", "tenant", in.Tenant, "expires_at", link.ExpiresAt, "by", by(r))
	return WriteJSON(w, http.StatusCreated, link)
}

// revokePortalLinks serves POST /hookgate/portal-links/revoke
// {"tenant"}: every link of the tenant issued so far is refused from now
// on, and its open sessions end at their next request.
func (h *Handler) revokePortalLinks(w http.ResponseWriter, r *http.Request) error {
	in, err := h.portalRequest(r)
	if err != nil {
		return err
	}
	if in.TTL != "" {
		return Errorf(problem.BadRequest, "a revocation takes the tenant alone")
	}
	if err := h.links.Revoke(r.Context(), in.Tenant); err != nil {
		return portalError(err)
	}
	h.logger.Info("portal links revoked", "tenant", in.Tenant, "by", by(r))
	return WriteJSON(w, http.StatusOK, map[string]any{"tenant": in.Tenant, "revoked": true})
}

// portalRequest reads a portal-links body, when the portal is configured.
func (h *Handler) portalRequest(r *http.Request) (PortalLinkRequest, error) {
	var in PortalLinkRequest
	if h.links == nil {
		return in, Errorf(problem.NoPortal, "no portal is configured: set portal_key and portal_url in the hookgate global option, "+
			"and serve webhook_console { portal } at portal_url")
	}
	if err := decodeBody(r, &in); err != nil {
		return in, err
	}
	if err := sender.CheckTenant(in.Tenant); err != nil {
		return in, Errorf(problem.BadRequest, "%v", err)
	}
	return in, nil
}

// portalError is a refusal of Issue or Revoke: their own (a ttl out of
// bounds) are 400; the store's failures pass on.
func portalError(err error) error {
	if errors.Is(err, portal.ErrRefused) {
		return Errorf(problem.BadRequest, "%v", err)
	}
	return err
}
