-- What happens at the receiver after `hookgate reconcile --repair`, for the
-- step by step of docs/reconcile.md: the stand-in enrollment service applies nothing,
-- so play it. The rows are dated five minutes back, out of the job's grace,
-- so that the next run compares them rather than leaving them out.

-- reservation.confirmed, ID reconcile:r-1002:confirmed:1: enroll r-1002.
INSERT INTO enrollments (reservation_id, state, version, updated_at)
	VALUES ('r-1002', 'active', 1, now() - interval '5 minutes');
-- reservation.expired, ID reconcile:r-1003:expired:2: drop r-1003's enrollment.
DELETE FROM enrollments WHERE reservation_id = 'r-1003';
-- r-1006's own event, in flight at the first run, lands.
INSERT INTO enrollments (reservation_id, state, version, updated_at)
	VALUES ('r-1006', 'active', 1, now() - interval '5 minutes');
-- r-1009, the orphan, is never repaired: a person decides, here to remove it.
DELETE FROM enrollments WHERE reservation_id = 'r-1009';
