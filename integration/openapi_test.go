package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/hookgate/hookgate/caddymodule"
)

// adminAPIDoc is the OpenAPI description of the admin API.
const adminAPIDoc = "../docs/admin-api.yaml"

// openAPI is the admin API's description, parsed, and a validator of
// requests and answers against it. Strict: a property, query parameter or
// header the document does not declare is an error, so that a field added
// to an answer must be added to the document too.
type openAPI struct {
	model *v3.Document
	v     validator.Validator
	opts  *config.ValidationOptions
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	spec, err := os.ReadFile(adminAPIDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatalf("%s: %v", adminAPIDoc, err)
	}
	if got := doc.GetVersion(); !strings.HasPrefix(got, "3.1") {
		t.Fatalf("%s: OpenAPI %s, want 3.1", adminAPIDoc, got)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("%s: %v", adminAPIDoc, err)
	}
	// A payload is the producer's: any JSON, undeclared.
	// The maps whose keys are the caller's (a destination's headers and metadata) are
	// ignored by the strict check, which takes additionalProperties for no property.
	opts := []config.Option{config.WithStrictMode(), config.WithStrictIgnorePaths("$.body.payload.**", "$.body.headers.*", "$.body.metadata.*", "$.body.*.headers.*", "$.body.*.metadata.*"), config.WithFormatAssertions()}
	v, errs := validator.NewValidator(doc, opts...)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", adminAPIDoc, errs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%s is not valid OpenAPI: %s", adminAPIDoc, e.Error())
		}
		t.FailNow()
	}
	return &openAPI{model: &m.Model, v: v, opts: config.NewValidationOptions(opts...)}
}

// operations returns the document's operations, "METHOD /path/{param}".
func (o *openAPI) operations() []string {
	var out []string
	for path, item := range o.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().KeysFromOldest() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// restWildcard is a net/http wildcard for the rest of the path: in
// OpenAPI, a path parameter of one segment (a "/" in it sent as %2F).
var restWildcard = regexp.MustCompile(`\{([a-z_]+)\.\.\.\}`)

// TestAdminAPIDocumentListsEveryRoute: the routes the gateway serves under
// /hookgate/ (caddymodule.AdminEndpoints, the httpapi packages' routing
// tables) and the operations of docs/admin-api.yaml are the same, both
// ways, parameter names included.
func TestAdminAPIDocumentListsEveryRoute(t *testing.T) {
	t.Parallel()
	api := loadOpenAPI(t)
	var served []string
	for _, e := range caddymodule.AdminEndpoints() {
		served = append(served, restWildcard.ReplaceAllString(e, "{$1}"))
	}
	slices.Sort(served)
	if dup := len(served) - len(slices.Compact(slices.Clone(served))); dup > 0 {
		t.Errorf("caddymodule.AdminEndpoints lists %d routes twice: %q", dup, served)
	}
	documented := api.operations()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("the gateway serves %s, which %s does not describe: add the operation", r, adminAPIDoc)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("%s describes %s, which the gateway does not serve (caddymodule.AdminEndpoints): drop it, or serve it", adminAPIDoc, op)
		}
	}
}

// adminClient calls the admin API and holds each request and answer to
// the document; it counts the operations answered with a success.
type adminClient struct {
	t         *testing.T
	api       *openAPI
	base      string
	succeeded map[string]int
	answered  map[string][]int
}

// answer is an admin API answer: its status, its body decoded, and for a
// problem its reason.
type answer struct {
	status int
	body   map[string]any
	reason string
	raw    []byte
}

// call sends method target (a path with its query) with body (JSON, if
// not nil) and checks that the document takes the request, that it
// describes the answer, and that the answer has status want (and, for an
// error, reason).
func (c *adminClient) call(method, target string, body any, want int, reason string) answer {
	c.t.Helper()
	return c.do(method, target, body, want, reason, true)
}

// refused is call for a request the document refuses (a parameter out of
// range, a required field missing): the gateway must refuse it too, as
// the document says it answers.
func (c *adminClient) refused(method, target string, body any, want int, reason string) answer {
	c.t.Helper()
	return c.do(method, target, body, want, reason, false)
}

func (c *adminClient) do(method, target string, body any, want int, reason string, valid bool) answer {
	c.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			c.t.Fatal(err)
		}
	}
	newRequest := func() *http.Request {
		var rd io.Reader = http.NoBody
		if raw != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+target, rd)
		if err != nil {
			c.t.Fatal(err)
		}
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req
	}
	name := method + " " + target

	req := newRequest()
	_, _, template := paths.FindPath(req, c.api.model, c.api.opts)
	if template == "" {
		c.t.Fatalf("%s: no path of %s matches", name, adminAPIDoc)
	}
	op := method + " " + template
	ok, errs := c.api.v.ValidateHttpRequestSync(req)
	switch {
	case valid && !ok:
		for _, e := range errs {
			c.t.Errorf("%s: the document refuses the request: %s", name, e.Error())
		}
	case !valid && ok:
		c.t.Errorf("%s: the document takes a request the gateway refuses with %d %s", name, want, reason)
	}

	req = newRequest()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(got))
	if ok, errs := c.api.v.ValidateHttpResponse(newRequest(), resp); !ok {
		for _, e := range errs {
			c.t.Errorf("%s: %d %s: the document does not describe the answer: %s", name, resp.StatusCode, got, e.Error())
		}
	}

	a := answer{status: resp.StatusCode, raw: got}
	// A file (the store's backup) is held to the document's schema alone.
	if resp.Header.Get("Content-Type") != "application/octet-stream" {
		if err := json.Unmarshal(got, &a.body); err != nil {
			c.t.Errorf("%s: %d %.200q is not a JSON object: %v", name, resp.StatusCode, got, err)
		}
	}
	if resp.StatusCode >= 400 {
		a.reason = problemBody(c.t, resp.StatusCode, resp.Header, got)
	}
	c.answered[op] = append(c.answered[op], resp.StatusCode)
	if resp.StatusCode < 300 {
		c.succeeded[op]++
	}
	if a.status != want || a.reason != reason {
		c.t.Errorf("%s: %d %.300q; want %d %s", name, a.status, got, want, reason)
	}
	return a
}

// openAPISite receives to the sender (/enqueue), dedupes (/in) and judges
// freshness by event time (/fresh) and by sequence (/seq), so that every
// admin route has something to show.
const openAPISite = `handle /enqueue {
		webhook_enqueue enrollment
	}
	handle /ingress/* {
		webhook_enqueue enrollment {
			keep_headers X-Event-Kind X-Some-Token
			keep_path
			redact_headers X-Some-Token
		}
	}
	handle /in {
		webhook_dedupe {
			key {http.request.header.Idempotency-Key}
		}
		respond "applied" 200
	}
	handle /fresh {
		webhook_freshness {
			entity {http.request.header.X-Entity}
			event_time {http.request.header.X-Event-Time}
		}
		respond "applied" 200
	}
	handle /seq {
		webhook_freshness {
			entity {http.request.header.X-Entity}
			sequence {http.request.header.X-Sequence}
		}
		respond "applied" 200
	}`

// TestAdminAPIAnswersAsDocumented calls every operation of
// docs/admin-api.yaml on a running gateway (embedded store, a sender with
// two destinations, one of which becomes an orphan on a reload; dedupe and
// freshness handlers), successes and refusals alike (a bad parameter, an
// unknown delivery or destination, a reused ID, a configured destination
// where an orphan is wanted, no store, no hookgate app), and validates
// each request and each answer against the document.
func TestAdminAPIAnswersAsDocumented(t *testing.T) {
	t.Parallel()
	api := loadOpenAPI(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.HasPrefix(r.Header.Get("Webhook-Id"), "dead-") {
			w.WriteHeader(400)
			_, _ = w.Write([]byte("no such reservation"))
		}
	})
	dest := func(name, extra string) string {
		return fmt.Sprintf("destination %s {\n\t\t\turl http://%s\n\t\t\tsecret %s\n\t\t\t%s\n\t\t}", name, up.Addr(), devSecret, extra)
	}
	global := fmt.Sprintf("hookgate {\n\t\tstore file\n\t\tportal_key %s\n\t\tportal_url http://portal.example/\n\t\tsender {\n\t\t\tbackoff 20ms 200ms\n\t\t\ttimeout 1s\n\t\t}\n\t\t%s\n\t\t%s\n\t\t%s\n\t}",
		portalKey, dest("enrollment", "events reservation.*"), dest("legacy", ""), dest("orders", "tenant t1\n\t\t\tevents seat.*"))
	g := startGateway(t, openAPISite, gatewayOptions{Global: global})
	c := &adminClient{t: t, api: api, base: g.Admin, succeeded: map[string]int{}, answered: map[string][]int{}}

	// Destinations, and enqueues to them.
	if a := c.call("GET", "/hookgate/destinations", nil, 200, ""); len(a.body["destinations"].([]any)) != 3 {
		t.Errorf("destinations: %s; want enrollment, legacy and t1/orders", a.raw)
	}
	// Destinations made through the API, the guard on (acme.invalid does
	// not resolve: it is left to the dial).
	acme := map[string]any{"name": "acme", "url": "https://acme.invalid/hooks", "events": []string{"seat.*"}, "headers": map[string]string{"X-Customer": "acme"}}
	if a := c.call("POST", "/hookgate/destinations", acme, 201, ""); !strings.HasPrefix(fmt.Sprint(a.body["secret"]), "whsec_") {
		t.Errorf("create: %s; want the new secret", a.raw)
	}
	c.call("POST", "/hookgate/destinations", acme, 409, "destination_exists")
	// Tenants, and their portal links.
	c.call("POST", "/hookgate/destinations", map[string]any{"tenant": "t1", "name": "billing", "url": "https://t1.invalid/"}, 201, "")
	if a := c.call("GET", "/hookgate/destinations?tenant=t1", nil, 200, ""); len(a.body["destinations"].([]any)) != 2 {
		t.Errorf("t1's destinations: %s; want t1/orders and t1/billing", a.raw)
	}
	c.call("GET", "/hookgate/destinations/t1%2Fbilling", nil, 200, "")
	c.call("POST", "/hookgate/events", map[string]any{"id": "t-1", "event_type": "seat.x", "tenant": "no/such", "payload": 1}, 400, "bad_tenant")
	c.call("POST", "/hookgate/portal-links", map[string]any{"tenant": "t1", "ttl": "2h"}, 201, "")
	c.call("POST", "/hookgate/portal-links", map[string]any{"tenant": "t9"}, 404, "unknown_tenant")
	c.call("POST", "/hookgate/portal-links", map[string]any{"tenant": "t1", "ttl": "1000h"}, 400, "bad_request")
	c.call("POST", "/hookgate/portal-links/revoke", map[string]any{"tenant": "t1"}, 200, "")
	c.call("POST", "/hookgate/portal-links/revoke", map[string]any{"tenant": "a/b"}, 400, "bad_request")
	c.call("DELETE", "/hookgate/destinations/t1%2Fbilling", nil, 200, "")
	c.call("POST", "/hookgate/destinations", map[string]any{"name": "enrollment", "url": "https://x.invalid/"}, 409, "destination_exists")
	c.call("POST", "/hookgate/destinations", map[string]any{"name": "meta", "url": "http://169.254.169.254/latest"}, 422, "destination_not_allowed")
	c.call("POST", "/hookgate/destinations", map[string]any{"name": "ftp", "url": "ftp://x.invalid/"}, 400, "bad_request")
	c.refused("POST", "/hookgate/destinations", map[string]any{"name": "a/b", "url": "https://x.invalid/"}, 400, "bad_request")
	if a := c.call("GET", "/hookgate/destinations/acme", nil, 200, ""); !strings.Contains(string(a.raw), `"source":"api"`) || strings.Contains(string(a.raw), "whsec_") {
		t.Errorf("show: %s; want the API destination, without its secret", a.raw)
	}
	c.call("GET", "/hookgate/destinations/enrollment", nil, 200, "")
	c.call("GET", "/hookgate/destinations/nowhere", nil, 404, "unknown_destination")
	c.call("PATCH", "/hookgate/destinations/acme", map[string]any{"description": "Acme's enrollment service"}, 200, "")
	c.refused("PATCH", "/hookgate/destinations/acme", map[string]any{"secret": "whsec_x"}, 400, "bad_request")
	c.call("PATCH", "/hookgate/destinations/enrollment", map[string]any{"description": "x"}, 409, "destination_static")
	c.call("PATCH", "/hookgate/destinations/nowhere", map[string]any{"description": "x"}, 404, "unknown_destination")
	if a := c.call("POST", "/hookgate/destinations/acme/rotate", map[string]any{"expire_previous_after": "1h"}, 200, ""); a.body["previous_expires_at"] == nil {
		t.Errorf("rotate: %s; want previous_expires_at", a.raw)
	}
	c.call("POST", "/hookgate/destinations/acme/rotate", map[string]any{"expire_previous_after": "soon"}, 400, "bad_request")
	c.call("DELETE", "/hookgate/destinations/enrollment", nil, 409, "destination_static")
	c.call("POST", "/hookgate/destinations/acme/enqueue", map[string]any{"id": "acme-1", "payload": 1}, 202, "")
	c.call("DELETE", "/hookgate/destinations/acme", nil, 409, "destination_not_empty")
	c.refused("DELETE", "/hookgate/destinations/acme?envelopes=all", nil, 400, "bad_request")
	if a := c.call("DELETE", "/hookgate/destinations/acme?envelopes=purge", nil, 200, ""); a.body["purged"] != float64(1) {
		t.Errorf("delete: %s; want 1 purged", a.raw)
	}
	c.call("DELETE", "/hookgate/destinations/acme", nil, 404, "unknown_destination")

	if a := c.call("POST", "/hookgate/destinations/legacy/pause", nil, 200, ""); a.body["state"] != "paused" {
		t.Errorf("pause: %s", a.raw)
	}
	c.call("POST", "/hookgate/destinations/nowhere/pause", nil, 404, "unknown_destination")
	if a := c.call("POST", "/hookgate/destinations/enrollment/resume", nil, 200, ""); a.body["state"] != "active" {
		t.Errorf("resume: %s", a.raw)
	}
	if a := c.call("POST", "/hookgate/destinations/enrollment/enable", nil, 200, ""); a.body["state"] != "active" {
		t.Errorf("enable: %s", a.raw)
	}
	c.call("POST", "/hookgate/destinations/nope/enable", nil, 404, "unknown_destination")
	if a := c.call("POST", "/hookgate/destinations/legacy/enqueue", map[string]any{"id": "legacy-1", "payload": map[string]any{"n": 1}}, 202, ""); a.body["state"] != "paused" {
		t.Errorf("enqueue to a paused destination: %s", a.raw)
	}
	event := map[string]any{"id": "ok-1", "event_type": "reservation.confirmed", "entity": "r-1",
		"event_time": "2026-01-02T03:04:05Z", "payload": map[string]any{"reservation_id": "r-1", "nights": 2}}
	c.call("POST", "/hookgate/destinations/enrollment/enqueue", event, 202, "")
	if a := c.call("POST", "/hookgate/destinations/enrollment/enqueue", event, 202, ""); a.body["duplicate"] != true {
		t.Errorf("the same event again: %s; want a duplicate", a.raw)
	}
	c.call("POST", "/hookgate/destinations/enrollment/enqueue", map[string]any{"id": "ok-1", "payload": "another"}, 422, "key_reused_with_different_payload")
	c.call("POST", "/hookgate/destinations/enrollment/enqueue", map[string]any{"id": "ok-2", "payload": 1, "event_time": "yesterday"}, 400, "malformed_event_time")
	c.refused("POST", "/hookgate/destinations/enrollment/enqueue", map[string]any{"payload": map[string]any{}}, 400, "missing_idempotency_key")
	c.refused("POST", "/hookgate/destinations/enrollment/enqueue", map[string]any{"id": 7, "payload": map[string]any{}}, 400, "bad_id")
	c.call("POST", "/hookgate/destinations/nowhere/enqueue", event, 404, "unknown_destination")
	for i := range 3 {
		c.call("POST", "/hookgate/destinations/enrollment/enqueue", map[string]any{"id": fmt.Sprint("dead-", i), "payload": map[string]any{"n": i}}, 202, "")
	}
	if a := c.call("POST", "/hookgate/events", map[string]any{"id": "ev-1", "event_type": "reservation.cancelled", "payload": map[string]any{"reservation_id": "r-2"}}, 202, ""); len(a.body["deliveries"].([]any)) != 1 {
		t.Errorf("a fan-out: %s; want a delivery to enrollment", a.raw)
	}
	c.call("POST", "/hookgate/events", map[string]any{"id": "ev-2", "payload": map[string]any{}}, 400, "missing_event_type")

	waitFor(t, "the three dead letters and the two deliveries", func() bool {
		d := destinationsOf(t, g)["enrollment"]
		depth := d["depth"].(map[string]any)
		return depth["dead"] == float64(3) && depth["queued"] == float64(0) && depth["leased"] == float64(0)
	})

	// Dead letters.
	if a := c.call("GET", "/hookgate/dlq/summary", nil, 200, ""); a.body["total"] != float64(3) {
		t.Errorf("summary: %s", a.raw)
	}
	c.call("GET", "/hookgate/dlq/summary?destination=enrollment&class=http_4xx&id=dead-0&id=dead-1&since=2020-01-01T00:00:00Z", nil, 200, "")
	c.refused("GET", "/hookgate/dlq/summary?class=bogus", nil, 400, "bad_request")
	if a := c.call("GET", "/hookgate/dlq?destination=enrollment&limit=2", nil, 200, ""); len(a.body["entries"].([]any)) != 2 || a.body["next_cursor"] == "" {
		t.Errorf("a page of 2: %s", a.raw)
	} else {
		c.call("GET", "/hookgate/dlq?destination=enrollment&limit=2&cursor="+a.body["next_cursor"].(string), nil, 200, "")
	}
	c.refused("GET", "/hookgate/dlq?limit=0", nil, 400, "bad_request")
	c.refused("GET", "/hookgate/dlq?until=yesterday", nil, 400, "bad_request")
	if a := c.call("GET", "/hookgate/dlq/dead-1", nil, 200, ""); a.body["state"] != "dead" || len(a.body["attempt_log"].([]any)) == 0 {
		t.Errorf("a dead letter: %s", a.raw)
	}
	c.call("GET", "/hookgate/dlq/dead-1?destination=enrollment", nil, 200, "")
	c.call("GET", "/hookgate/dlq/nope", nil, 404, "not_found")
	c.call("GET", "/hookgate/dlq/dead-1?destination=nowhere", nil, 400, "bad_request")
	if a := c.call("POST", "/hookgate/dlq/redrive", map[string]any{"ids": []string{"dead-0"}, "limit": 1, "dry_run": true}, 200, ""); a.body["matched"] != float64(1) || a.body["moved"] != float64(0) {
		t.Errorf("a dry run: %s", a.raw)
	}
	c.refused("POST", "/hookgate/dlq/redrive", map[string]any{"ids": []string{"dead-0"}}, 400, "bad_limit")
	c.refused("POST", "/hookgate/dlq/redrive", map[string]any{"class": "bogus", "limit": 1}, 400, "bad_request")
	rd := c.call("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "enrollment", "ids": []string{"dead-0"}, "limit": 1, "by": "openapi test"}, 200, "")
	if id, _ := rd.body["redrive_id"].(string); !strings.HasPrefix(id, "rd_") || rd.body["moved"] != float64(1) {
		t.Errorf("a redrive: %s", rd.raw)
	} else {
		c.call("GET", "/hookgate/redrives/"+id, nil, 200, "")
	}
	c.call("GET", "/hookgate/redrives/rd_nope", nil, 404, "not_found")
	c.call("DELETE", "/hookgate/dlq/dead-1", nil, 200, "")
	c.call("DELETE", "/hookgate/dlq/dead-1", nil, 404, "not_found")
	c.call("POST", "/hookgate/dlq/purge", map[string]any{"limit": 1}, 400, "filter_required") // the schema takes it: the rule is across fields
	c.call("POST", "/hookgate/dlq/purge", map[string]any{"destination": "enrollment"}, 400, "bad_limit")
	if a := c.call("POST", "/hookgate/dlq/purge", map[string]any{"all": true, "dry_run": true}, 200, ""); a.body["removed"] != float64(0) || a.body["matched"] == float64(0) {
		t.Errorf("purge, a dry run: %s", a.raw)
	}
	if a := c.call("POST", "/hookgate/dlq/purge", map[string]any{"ids": []string{"dead-2"}}, 200, ""); a.body["removed"] != float64(1) {
		t.Errorf("purge: %s", a.raw)
	}
	c.refused("POST", "/hookgate/dlq/purge", map[string]any{"idz": []string{"dead-2"}}, 400, "bad_request")

	// The delivery history.
	waitFor(t, "the two deliveries in the history", func() bool {
		resp, err := http.Get(g.Admin + "/hookgate/deliveries?state=delivered")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var page struct{ Entries []any }
		return json.NewDecoder(resp.Body).Decode(&page) == nil && len(page.Entries) >= 2
	})
	if a := c.call("GET", "/hookgate/deliveries?destination=enrollment&state=delivered&limit=10", nil, 200, ""); len(a.body["entries"].([]any)) != 2 {
		t.Errorf("the history: %s; want ok-1 and ev-1", a.raw)
	}
	c.call("GET", "/hookgate/deliveries?event_type=reservation.confirmed&entity=r-1&id=ok-1&since=2020-01-01T00:00:00Z&until=2100-01-01T00:00:00Z", nil, 200, "")
	c.refused("GET", "/hookgate/deliveries?limit=5000", nil, 400, "bad_limit")
	if a := c.call("GET", "/hookgate/deliveries?state=queued&destination=legacy", nil, 200, ""); len(a.body["entries"].([]any)) != 1 {
		t.Errorf("queued: %s; want legacy-1, held by the pause", a.raw)
	}
	c.call("GET", "/hookgate/deliveries?state=queued&since=2020-01-01T00:00:00Z", nil, 400, "bad_request")
	c.refused("GET", "/hookgate/deliveries?state=leased", nil, 400, "bad_request")
	c.call("GET", "/hookgate/deliveries?cursor=nope", nil, 400, "bad_request")
	c.call("GET", "/hookgate/deliveries?destination=nowhere", nil, 404, "unknown_destination")
	if a := c.call("GET", "/hookgate/deliveries/enrollment/ok-1", nil, 200, ""); a.body["state"] != "delivered" || a.body["payload"] == nil {
		t.Errorf("a delivery: %s", a.raw)
	}
	c.call("GET", "/hookgate/deliveries/enrollment/nope", nil, 404, "not_found")
	c.call("GET", "/hookgate/deliveries/nowhere/ok-1", nil, 404, "unknown_destination")
	c.call("POST", "/hookgate/deliveries/resend", map[string]any{"ids": []string{"ok-1"}, "state": "delivered", "limit": 1, "dry_run": true}, 200, "")
	rs := c.call("POST", "/hookgate/deliveries/resend", map[string]any{"destination": "enrollment", "ids": []string{"ok-1"}, "limit": 1, "by": "openapi test"}, 200, "")
	if id, _ := rs.body["redrive_id"].(string); id == "" {
		t.Errorf("a resend: %s", rs.raw)
	} else if a := c.call("GET", "/hookgate/redrives/"+id, nil, 200, ""); a.body["kind"] != "resend" {
		t.Errorf("a resend's record: %s", a.raw)
	}
	c.refused("POST", "/hookgate/deliveries/resend", map[string]any{"ids": []string{"ok-1"}, "limit": 0}, 400, "bad_limit")
	c.call("POST", "/hookgate/deliveries/resend", map[string]any{"destination": "nowhere", "limit": 1}, 404, "unknown_destination")

	// What durable ingress kept of a request, in a dead letter, a
	// delivery and the export's page: the redacted value masked.
	const secret = "tok-9f8e7d6c"
	for _, id := range []string{"ingress-1", "dead-ingress"} {
		h := http.Header{"Idempotency-Key": {id}, "X-Event-Kind": {"push"}, "X-Some-Token": {secret}}
		if st, _, got := post(t, g.URL+"/ingress/gh?org=acme", h, []byte(`{}`)); st != 202 {
			t.Fatalf("POST /ingress/gh: %d %s", st, got)
		}
	}
	waitFor(t, "the ingress delivery and dead letter", func() bool {
		settled := 0
		for _, target := range []string{"/hookgate/deliveries/enrollment/ingress-1", "/hookgate/deliveries/enrollment/dead-ingress"} {
			resp, err := http.Get(g.Admin + target)
			if err != nil {
				t.Fatal(err)
			}
			var v struct{ State string }
			if json.NewDecoder(resp.Body).Decode(&v) == nil && (v.State == "delivered" || v.State == "dead") {
				settled++
			}
			_ = resp.Body.Close()
		}
		return settled == 2
	})
	wantReceived := map[string]any{"source": "", "path": "/ingress/gh?org=acme",
		"headers": map[string]any{"X-Event-Kind": []any{"push"}, "X-Some-Token": []any{"(not shown)"}}}
	for _, target := range []string{"/hookgate/dlq/dead-ingress?destination=enrollment", "/hookgate/deliveries/enrollment/ingress-1"} {
		a := c.call("GET", target, nil, 200, "")
		if diff := cmp.Diff(wantReceived, a.body["received"]); diff != "" || bytes.Contains(a.raw, []byte(secret)) {
			t.Errorf("GET %s: received (-want +got):\n%s\n%s", target, diff, a.raw)
		}
	}
	a := c.call("GET", "/hookgate/deliveries?destination=enrollment&received=true", nil, 200, "")
	withReceived := 0
	for _, e := range a.body["entries"].([]any) {
		if r, ok := e.(map[string]any)["received"]; ok {
			withReceived++
			if diff := cmp.Diff(wantReceived, r); diff != "" {
				t.Errorf("the export's page: received (-want +got):\n%s", diff)
			}
		}
	}
	if withReceived != 2 || bytes.Contains(a.raw, []byte(secret)) {
		t.Errorf("the export's page: %d entries with received, want 2:\n%s", withReceived, a.raw)
	}
	c.refused("GET", "/hookgate/deliveries?received=maybe", nil, 400, "bad_request")

	// What the gateway remembers.
	for _, r := range []struct {
		path   string
		header http.Header
	}{
		{"/in", http.Header{"Idempotency-Key": {"key 1/ü"}}},
		{"/fresh", http.Header{"X-Entity": {"r-1"}, "X-Event-Time": {"2026-01-02T03:04:05Z"}}},
		{"/seq", http.Header{"X-Entity": {"r-1"}, "X-Sequence": {"7"}}},
	} {
		if st, _, got := post(t, g.URL+r.path, r.header, []byte(`{}`)); st != 200 {
			t.Fatalf("POST %s: %d %s", r.path, st, got)
		}
	}
	if a := c.call("GET", "/hookgate/dedupe/key%201%2F%C3%BC", nil, 200, ""); a.body["state"] != "recorded" || a.body["key"] != "key 1/ü" {
		t.Errorf("a recorded key: %s", a.raw)
	}
	if a := c.call("GET", "/hookgate/dedupe/never", nil, 200, ""); a.body["state"] != "absent" {
		t.Errorf("an unknown key: %s", a.raw)
	}
	c.call("DELETE", "/hookgate/dedupe/key%201%2F%C3%BC", nil, 200, "")
	c.call("DELETE", "/hookgate/dedupe/key%201%2F%C3%BC", nil, 404, "not_found")
	a = c.call("GET", "/hookgate/freshness/r-1", nil, 200, "")
	if diff := cmp.Diff(map[string]any{"time": "2026-01-02T03:04:05Z", "sequence": float64(7)}, map[string]any{
		"time": a.body["event_time"].(map[string]any)["watermark"], "sequence": a.body["sequence"].(map[string]any)["watermark"],
	}); diff != "" {
		t.Errorf("an entity's watermarks (-want +got):\n%s\n%s", diff, a.raw)
	}
	c.call("GET", "/hookgate/freshness/r-2", nil, 200, "")
	if a := c.call("GET", "/hookgate/store/backup", nil, 200, ""); len(a.raw) == 0 {
		t.Error("the store's backup is empty")
	}

	// legacy, no longer configured, is an orphan: moved, then purged.
	caddyfile, err := os.ReadFile(g.Config)
	if err != nil {
		t.Fatal(err)
	}
	withoutLegacy := strings.Replace(string(caddyfile), dest("legacy", ""), "", 1)
	if withoutLegacy == string(caddyfile) {
		t.Fatal("the Caddyfile has no legacy destination to remove")
	}
	reload(t, g, withoutLegacy)
	if a := c.call("GET", "/hookgate/destinations", nil, 200, ""); !strings.Contains(string(a.raw), `"state":"orphaned"`) {
		t.Errorf("destinations after the reload: %s; want legacy orphaned", a.raw)
	}
	c.call("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "legacy", "limit": 1}, 409, "destination_orphaned")
	c.call("POST", "/hookgate/deliveries/resend", map[string]any{"destination": "legacy", "limit": 1}, 409, "destination_orphaned")
	c.call("POST", "/hookgate/destinations/enrollment/purge", nil, 409, "destination_configured")
	c.call("POST", "/hookgate/destinations/enrollment/move", map[string]any{"to": "enrollment"}, 409, "destination_configured")
	c.refused("POST", "/hookgate/destinations/legacy/move", map[string]any{}, 400, "bad_request")
	c.call("POST", "/hookgate/destinations/legacy/move", map[string]any{"to": "nowhere"}, 404, "unknown_destination")
	if a := c.call("POST", "/hookgate/destinations/legacy/move", map[string]any{"to": "enrollment"}, 200, ""); a.body["moved"] != float64(1) {
		t.Errorf("move: %s", a.raw)
	}
	c.call("POST", "/hookgate/destinations/legacy/purge", nil, 200, "")
	c.call("POST", "/hookgate/destinations/never-was/purge", nil, 404, "unknown_destination")

	// The hookgate app runs with neither a sender nor a handler that uses
	// the store; then no hookgate app runs at all.
	config := func(global string) string {
		return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\t%s\n}\n\n%s {\n\trespond 200\n}\n", strings.TrimPrefix(g.Admin, "http://"), global, g.URL)
	}
	reload(t, g, config("hookgate {\n\t\tstore file\n\t}"))
	c.call("GET", "/hookgate/dedupe/never", nil, 404, "no_store")
	c.call("DELETE", "/hookgate/dedupe/never", nil, 404, "no_store")
	c.call("GET", "/hookgate/freshness/r-1", nil, 404, "no_store")
	c.call("GET", "/hookgate/store/backup", nil, 404, "no_store")
	c.call("GET", "/hookgate/destinations", nil, 404, "no_sender")
	c.call("POST", "/hookgate/events", map[string]any{"id": "ev-3", "event_type": "reservation.cancelled", "payload": 1}, 404, "no_sender")
	reload(t, g, config(""))
	c.call("GET", "/hookgate/destinations", nil, 404, "no_hookgate")
	c.call("GET", "/hookgate/dedupe/never", nil, 404, "no_hookgate")

	// Every documented operation was called, and answered with a success.
	for _, op := range api.operations() {
		if c.succeeded[op] == 0 {
			t.Errorf("%s was not answered with a success (answers: %v): call it", op, c.answered[op])
		}
	}
	t.Logf("statuses by operation: %v", c.answered)
}
