package problem

import "net/http"

// Reason is a reason code and the one status it answers with. Every
// rejection hookgate writes is one of the Reasons below: a writer names
// the variable, never the string, so that a code has one status
// everywhere and the docs check (docs_test.go) reads them all here.
type Reason struct {
	Code   string
	Status int
}

// Receiving: webhook_verify, its handshakes, and every handler that reads
// the body.
var (
	BodyTooLarge                  = Reason{"body_too_large", http.StatusRequestEntityTooLarge}
	BodyUnreadable                = Reason{"body_unreadable", http.StatusBadRequest}
	MissingHeader                 = Reason{"missing_header", http.StatusBadRequest}
	MalformedHeader               = Reason{"malformed_header", http.StatusBadRequest}
	BadSignature                  = Reason{"bad_signature", http.StatusUnauthorized}
	TimestampOutOfTolerance       = Reason{"timestamp_out_of_tolerance", http.StatusUnauthorized}
	BadVerifyToken                = Reason{"bad_verify_token", http.StatusForbidden} // Meta's handshake
	BadCRCToken                   = Reason{"bad_crc_token", http.StatusBadRequest}   // X's CRC
	OriginNotAllowed              = Reason{"origin_not_allowed", http.StatusForbidden}
	HandshakeRefused              = Reason{"handshake_refused", http.StatusConflict}            // asana: the endpoint holds another secret
	MalformedBody                 = Reason{"malformed_body", http.StatusBadRequest}             // sns: not an SNS message
	KeyUnavailable                = Reason{"key_unavailable", http.StatusServiceUnavailable}    // sns: the certificate could not be fetched
	TopicNotAllowed               = Reason{"topic_not_allowed", http.StatusForbidden}           // sns
	CertURLNotAllowed             = Reason{"cert_url_not_allowed", http.StatusForbidden}        // sns
	SubscriptionNotConfirmed      = Reason{"subscription_not_confirmed", http.StatusBadGateway} // sns
	MissingIdempotencyKey         = Reason{"missing_idempotency_key", http.StatusBadRequest}
	IdempotencyKeyTooLong         = Reason{"idempotency_key_too_long", http.StatusBadRequest}
	InFlight                      = Reason{"in_flight", http.StatusConflict}
	KeyReusedWithDifferentPayload = Reason{"key_reused_with_different_payload", http.StatusUnprocessableEntity}
)

// Receiving: webhook_freshness (malformed_event_time and
// missing_event_type also from webhook_enqueue and POST /hookgate/events).
var (
	MissingEntity      = Reason{"missing_entity", http.StatusBadRequest}
	BadTenant          = Reason{"bad_tenant", http.StatusBadRequest} // webhook_enqueue, POST /hookgate/events
	EntityTooLong      = Reason{"entity_too_long", http.StatusBadRequest}
	MissingEventTime   = Reason{"missing_event_time", http.StatusBadRequest}
	MalformedEventTime = Reason{"malformed_event_time", http.StatusBadRequest}
	MissingSequence    = Reason{"missing_sequence", http.StatusBadRequest}
	MalformedSequence  = Reason{"malformed_sequence", http.StatusBadRequest}
	EventTimeInFuture  = Reason{"event_time_in_future", http.StatusBadRequest}
	EntityBusy         = Reason{"entity_busy", http.StatusConflict}
	Superseded         = Reason{"superseded", http.StatusConflict}
	TooOld             = Reason{"too_old", http.StatusConflict}
)

// The store and the forward to the upstream.
var (
	StoreUnavailable           = Reason{"store_unavailable", http.StatusServiceUnavailable}
	UpstreamResponseIncomplete = Reason{"upstream_response_incomplete", http.StatusBadGateway}
	UpstreamTimeout            = Reason{"upstream_timeout", http.StatusGatewayTimeout}
)

// The admin API, webhook_enqueue and POST /hookgate/events.
var (
	MethodNotAllowed      = Reason{"method_not_allowed", http.StatusMethodNotAllowed}
	NoHookgate            = Reason{"no_hookgate", http.StatusNotFound}
	NoStore               = Reason{"no_store", http.StatusNotFound}
	StoreNotFile          = Reason{"store_not_file", http.StatusConflict}
	BadRequest            = Reason{"bad_request", http.StatusBadRequest}
	NotFound              = Reason{"not_found", http.StatusNotFound}
	UnknownDestination    = Reason{"unknown_destination", http.StatusNotFound}
	BadLimit              = Reason{"bad_limit", http.StatusBadRequest}
	FilterRequired        = Reason{"filter_required", http.StatusBadRequest}
	NoSender              = Reason{"no_sender", http.StatusNotFound}
	DestinationOrphaned   = Reason{"destination_orphaned", http.StatusConflict}
	DestinationConfigured = Reason{"destination_configured", http.StatusConflict}
	DestinationExists     = Reason{"destination_exists", http.StatusConflict}
	DestinationStatic     = Reason{"destination_static", http.StatusConflict}
	DestinationNotEmpty   = Reason{"destination_not_empty", http.StatusConflict}
	DestinationChanged    = Reason{"destination_changed", http.StatusConflict}
	DestinationNotAllowed = Reason{"destination_not_allowed", http.StatusUnprocessableEntity}
	DestinationUnreadable = Reason{"destination_unreadable", http.StatusConflict}
	EmptyPayload          = Reason{"empty_payload", http.StatusBadRequest}
	MalformedJSON         = Reason{"malformed_json", http.StatusBadRequest}
	BadID                 = Reason{"bad_id", http.StatusBadRequest}
	MissingEventType      = Reason{"missing_event_type", http.StatusBadRequest}
	HeadersTooLarge       = Reason{"headers_too_large", http.StatusRequestHeaderFieldsTooLarge}
)

// The console.
var (
	SenderNotRunning     = Reason{"sender_not_running", http.StatusServiceUnavailable}
	ConsoleScopeUnknown  = Reason{"console_scope_unknown", http.StatusForbidden}
	CSRFTokenInvalid     = Reason{"csrf_token_invalid", http.StatusForbidden}
	CrossOriginRequest   = Reason{"cross_origin_request", http.StatusForbidden}
	ConfirmTokenMissing  = Reason{"confirm_token_missing", http.StatusBadRequest}
	ConfirmTokenStale    = Reason{"confirm_token_stale", http.StatusConflict}
	ConfirmTokenMismatch = Reason{"confirm_token_mismatch", http.StatusConflict}
	RedriveInProgress    = Reason{"redrive_in_progress", http.StatusConflict}
	ResumeNotAllowed     = Reason{"resume_not_allowed", http.StatusForbidden}
	RedriveIncomplete    = Reason{"redrive_incomplete", http.StatusServiceUnavailable}
	RenderFailed         = Reason{"render_failed", http.StatusInternalServerError}
)

// The portal: a tenant's console opened by a link (package portal), and
// the admin API's portal-links routes.
var (
	PortalSessionMissing = Reason{"portal_session_missing", http.StatusForbidden}
	PortalLinkInvalid    = Reason{"portal_link_invalid", http.StatusForbidden}
	PortalLinkExpired    = Reason{"portal_link_expired", http.StatusForbidden}
	PortalLinkRevoked    = Reason{"portal_link_revoked", http.StatusForbidden}
	NoPortal             = Reason{"no_portal", http.StatusNotFound}
	UnknownTenant        = Reason{"unknown_tenant", http.StatusNotFound}
)

// Reasons is every reason code hookgate writes, in the order above.
var Reasons = []Reason{
	BodyTooLarge, BodyUnreadable, MissingHeader, MalformedHeader, BadSignature,
	TimestampOutOfTolerance, BadVerifyToken, BadCRCToken, OriginNotAllowed, HandshakeRefused,
	MalformedBody, KeyUnavailable, TopicNotAllowed, CertURLNotAllowed, SubscriptionNotConfirmed,
	MissingIdempotencyKey, IdempotencyKeyTooLong, InFlight, KeyReusedWithDifferentPayload,
	MissingEntity, BadTenant, EntityTooLong, MissingEventTime, MalformedEventTime, MissingSequence,
	MalformedSequence, EventTimeInFuture, EntityBusy, Superseded, TooOld,
	StoreUnavailable, UpstreamResponseIncomplete, UpstreamTimeout,
	MethodNotAllowed, NoHookgate, NoStore, StoreNotFile, BadRequest, NotFound,
	UnknownDestination, BadLimit, FilterRequired, NoSender, DestinationOrphaned,
	DestinationConfigured, DestinationExists, DestinationStatic, DestinationNotEmpty, DestinationChanged, DestinationNotAllowed, DestinationUnreadable, EmptyPayload, MalformedJSON, BadID, MissingEventType, HeadersTooLarge,
	SenderNotRunning, ConsoleScopeUnknown, CSRFTokenInvalid, CrossOriginRequest,
	ConfirmTokenMissing, ConfirmTokenStale, ConfirmTokenMismatch, RedriveInProgress,
	ResumeNotAllowed, RedriveIncomplete, RenderFailed,
	PortalSessionMissing, PortalLinkInvalid, PortalLinkExpired, PortalLinkRevoked, NoPortal, UnknownTenant,
}
