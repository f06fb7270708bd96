package reconcile

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a Source over a query whose first four columns are the key,
// the state, the version and when the row was last updated. The query is
// wrapped so that rows come in key byte order (ORDER BY key COLLATE "C":
// the user writes no ORDER BY), and read through a server-side cursor in
// a read-only, repeatable-read transaction: one consistent snapshot, never
// all in memory on either side.
type Postgres struct {
	DSN   string
	Query string
	// Fetch is how many rows each FETCH reads. Default 5000.
	Fetch int
}

// Rows implements Source.
func (p Postgres) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		if err := p.rows(ctx, yield); err != nil {
			yield(Row{}, err)
		}
	}
}

func (p Postgres) rows(ctx context.Context, yield func(Row, error) bool) error {
	fetch := p.Fetch
	if fetch <= 0 {
		fetch = 5000
	}
	conn, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	wrapped := `DECLARE hookgate_reconcile NO SCROLL CURSOR FOR
SELECT q.k::text, q.s::text, q.v::bigint, q.u::timestamptz
FROM (` + p.Query + `) AS q(k, s, v, u)
ORDER BY q.k::text COLLATE "C"`
	if _, err := tx.Exec(ctx, wrapped); err != nil {
		return fmt.Errorf("postgres: the query: %w", err)
	}
	for {
		rows, err := tx.Query(ctx, fmt.Sprintf("FETCH %d FROM hookgate_reconcile", fetch))
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		n := 0
		for rows.Next() {
			var r Row
			var state *string
			var updated *time.Time
			if err := rows.Scan(&r.Key, &state, &r.Version, &updated); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: row %q: %w", r.Key, err)
			}
			if state != nil {
				r.State = *state
			}
			if updated != nil {
				r.UpdatedAt = *updated
			}
			n++
			if !yield(r, nil) {
				rows.Close()
				return nil
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if n < fetch {
			return nil
		}
	}
}
