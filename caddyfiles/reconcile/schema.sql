-- The two sides of caddyfiles/reconcile.Caddyfile's job "enrollments", in
-- one database for the walk-through (in life, two: TRUTH_DSN and ENROLL_DSN).
-- The job's queries read key, state, version and updated_at, in that order;
-- hookgate orders by key itself.

-- The source of truth: the booking system's reservations.
CREATE TABLE reservations (
	id         text PRIMARY KEY,
	status     text NOT NULL,        -- confirmed, expired, ...
	version    bigint NOT NULL,      -- names a repair: reconcile:<id>:<status>:<version>
	updated_at timestamptz NOT NULL  -- rows changed within the job's grace are left out
);

-- The receiver's state: the enrollment service's enrollments.
CREATE TABLE enrollments (
	reservation_id text PRIMARY KEY,
	state          text NOT NULL,    -- active, cancelled, ...
	version        bigint NOT NULL,
	updated_at     timestamptz NOT NULL
);
