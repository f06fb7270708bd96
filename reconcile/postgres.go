package reconcile

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
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
	conn, err := connect(ctx, p.DSN)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // the transaction is read-only: nothing to lose
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // read-only: ending it is all Rollback does
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

// ErrBadDSN means a DSN that does not parse, or not unambiguously. Its
// error says nothing more: pgx quotes such a DSN, masking only what it
// takes for the password, and a DSN that does not parse is exactly one
// whose password it may not find.
var ErrBadDSN = errors.New("the DSN does not parse, or not unambiguously (are special characters in the password %-escaped?)")

// connect opens a connection to dsn. Its errors never show the DSN, nor
// the password: a DSN that does not parse, or whose URL form has an '@'
// outside its user info (an unescaped '@' or '/' in the password, which
// pgx would read as part of the host or the database, and show in its
// errors), is ErrBadDSN, and the password is masked in any other error.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	if rest, ok := cutURLScheme(dsn); ok {
		head, _, _ := strings.Cut(rest, "?")
		if n := strings.Count(head, "@"); n > 1 || n == 1 && strings.Contains(head[:strings.Index(head, "@")], "/") {
			return nil, ErrBadDSN
		}
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, ErrBadDSN
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, masked(err, cfg.Password)
	}
	return conn, nil
}

// cutURLScheme returns dsn after postgres:// or postgresql://, and
// whether it has one of them.
func cutURLScheme(dsn string) (string, bool) {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if rest, ok := strings.CutPrefix(dsn, scheme); ok {
			return rest, true
		}
	}
	return "", false
}

// maskedError is an error whose text has a secret masked.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// masked is err with every occurrence of secret in its text masked.
func masked(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &maskedError{msg: strings.ReplaceAll(err.Error(), secret, "xxxxx"), err: err}
}
