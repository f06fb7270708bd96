package caddymodule

// The reason codes of the problem+json answers caddymodule writes, each
// once. The README's rejection tables and troubleshooting list every one
// (reasons_test.go holds them to it). Codes that a domain package writes
// (sender/httpapi, console, internal/forward) or decides (the stale
// answers, dedupe.ResultSuperseded and dedupe.ResultTooOld) live there.
const (
	// Every handler that reads the body (bufferBody).
	reasonBodyTooLarge   = "body_too_large"  // 413
	reasonBodyUnreadable = "body_unreadable" // 400

	// webhook_verify.
	reasonMissingHeader           = "missing_header"             // 400
	reasonMalformedHeader         = "malformed_header"           // 400
	reasonBadSignature            = "bad_signature"              // 401
	reasonTimestampOutOfTolerance = "timestamp_out_of_tolerance" // 401

	// webhook_dedupe; missing_idempotency_key also from webhook_enqueue.
	reasonMissingIdempotencyKey         = "missing_idempotency_key"           // 400
	reasonIdempotencyKeyTooLong         = "idempotency_key_too_long"          // 400
	reasonInFlight                      = "in_flight"                         // 409
	reasonKeyReusedWithDifferentPayload = "key_reused_with_different_payload" // 422

	// webhook_freshness; malformed_event_time also from webhook_enqueue.
	reasonMissingEntity      = "missing_entity"       // 400
	reasonEntityTooLong      = "entity_too_long"      // 400
	reasonMissingEventTime   = "missing_event_time"   // 400
	reasonMalformedEventTime = "malformed_event_time" // 400
	reasonMissingSequence    = "missing_sequence"     // 400
	reasonMalformedSequence  = "malformed_sequence"   // 400
	reasonEventTimeInFuture  = "event_time_in_future" // 400
	reasonEntityBusy         = "entity_busy"          // 409

	// webhook_dedupe and webhook_freshness: the store failed.
	reasonStoreUnavailable = "store_unavailable" // 503

	// webhook_enqueue (sender/httpapi answers the rest of its refusals).
	reasonMethodNotAllowed = "method_not_allowed" // 405; also the admin API

	// webhook_console.
	reasonSenderNotRunning    = "sender_not_running"    // 503
	reasonConsoleScopeUnknown = "console_scope_unknown" // 403

	// The admin API (dedupe/httpapi and sender/httpapi answer the rest).
	reasonNoHookgate = "no_hookgate" // 404, any /hookgate/ route
	reasonNoStore    = "no_store"    // 404, /hookgate/dedupe/, /hookgate/freshness/ and /hookgate/store/backup
)
