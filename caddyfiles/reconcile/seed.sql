-- Rows for caddyfiles/reconcile.Caddyfile's job "enrollments"
-- (expect confirmed active, expect expired none, grace 2m): one drift of
-- each kind, and one row inside grace. Run `hookgate reconcile` within two
-- minutes of seeding: after that, r-1006 is out of grace and is missing too.
INSERT INTO reservations (id, status, version, updated_at) VALUES
	('r-1001', 'confirmed', 3, now() - interval '1 hour'), -- enrolled: in agreement
	('r-1002', 'confirmed', 1, now() - interval '1 hour'), -- not enrolled: missing
	('r-1003', 'expired',   2, now() - interval '1 hour'), -- still enrolled: mismatched
	('r-1005', 'expired',   4, now() - interval '1 hour'), -- not enrolled: in agreement
	('r-1006', 'confirmed', 1, now());                     -- confirmed just now, its event in flight: inside grace

INSERT INTO enrollments (reservation_id, state, version, updated_at) VALUES
	('r-1001', 'active', 3, now() - interval '1 hour'),
	('r-1003', 'active', 1, now() - interval '1 hour'),
	('r-1009', 'active', 1, now() - interval '1 hour');   -- no such reservation: orphaned
