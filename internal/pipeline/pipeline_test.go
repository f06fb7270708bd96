package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// fakeClient records the pipelines sent. Each Exec blocks until the test
// releases it with a function that answers the pipeline's commands.
type fakeClient struct {
	mu   sync.Mutex
	sent [][]string        // the commands' names, pipeline by pipeline
	ctxs []context.Context // each pipeline's context
	gate chan func(cmds []redis.Cmder)
}

func newFake() *fakeClient { return &fakeClient{gate: make(chan func([]redis.Cmder))} }

func (f *fakeClient) Pipeline() redis.Pipeliner { return &fakePipe{f: f} }

// pipelines returns the pipelines sent so far.
func (f *fakeClient) pipelines() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.sent...)
}

// answer lets the pipeline in flight return, answering each command with
// its own name as the value.
func (f *fakeClient) answer() { f.gate <- answerNames }

// fail lets the pipeline in flight return with err on every command, as a
// broken connection does.
func (f *fakeClient) fail(err error) {
	f.gate <- func(cmds []redis.Cmder) {
		for _, c := range cmds {
			c.SetErr(err)
		}
	}
}

func answerNames(cmds []redis.Cmder) {
	for _, c := range cmds {
		c.(*redis.Cmd).SetVal(c.Args()[1])
	}
}

type fakePipe struct {
	redis.Pipeliner // nil: only Process and Exec are used
	f               *fakeClient
	cmds            []redis.Cmder
}

func (p *fakePipe) Process(_ context.Context, cmd redis.Cmder) error {
	p.cmds = append(p.cmds, cmd)
	return nil
}

func (p *fakePipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	names := make([]string, len(p.cmds))
	for i, c := range p.cmds {
		names[i] = c.Args()[1].(string)
	}
	p.f.mu.Lock()
	p.f.sent = append(p.f.sent, names)
	p.f.ctxs = append(p.f.ctxs, ctx)
	p.f.mu.Unlock()
	(<-p.f.gate)(p.cmds)
	return p.cmds, nil
}

// cmd is a command named name (its value once answered).
func cmd(name string) *redis.Cmd { return redis.NewCmd(context.Background(), "echo", name) }

type result struct {
	vals []string
	err  error
}

// do runs b.Do in a goroutine and returns where its result arrives.
func do(ctx context.Context, b *Batcher, names ...string) <-chan result {
	out := make(chan result, 1)
	cmds := make([]redis.Cmder, len(names))
	for i, n := range names {
		cmds[i] = cmd(n)
	}
	go func() {
		err := b.Do(ctx, cmds...)
		r := result{err: err}
		if err == nil {
			for _, c := range cmds {
				r.vals = append(r.vals, fmt.Sprint(c.(*redis.Cmd).Val()))
			}
		}
		out <- r
	}()
	return out
}

// TestLoneCallGoesAtOnce: with nothing in flight, a call is sent at once,
// alone: no timer holds it for company.
func TestLoneCallGoesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		res := do(t.Context(), b, "a1", "a2")
		synctest.Wait()
		if diff := cmp.Diff([][]string{{"a1", "a2"}}, f.pipelines()); diff != "" {
			t.Fatalf("pipelines sent (-want +got):\n%s", diff)
		}
		f.answer()
		if r := <-res; r.err != nil || !cmp.Equal(r.vals, []string{"a1", "a2"}) {
			t.Fatalf("Do = %v, %v; want [a1 a2], nil", r.vals, r.err)
		}
		if got := b.Stats(); got != (Stats{Pipelines: 1, Commands: 2}) {
			t.Errorf("Stats = %+v, want 1 pipeline of 2 commands", got)
		}
	})
}

// TestCallsArrivingInFlightGoTogether: the calls that arrive while a
// pipeline is in flight go together as the next one, each call's commands
// together and in order.
func TestCallsArrivingInFlightGoTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		first := do(t.Context(), b, "a")
		synctest.Wait()
		var later []<-chan result
		for _, c := range []string{"b", "c", "d"} {
			later = append(later, do(t.Context(), b, c+"1", c+"2", c+"3"))
			synctest.Wait() // in this order
		}
		if got := len(f.pipelines()); got != 1 {
			t.Fatalf("%d pipelines sent while the first was in flight, want 1", got)
		}
		f.answer()
		if r := <-first; r.err != nil {
			t.Fatal(r.err)
		}
		synctest.Wait()
		want := [][]string{{"a"}, {"b1", "b2", "b3", "c1", "c2", "c3", "d1", "d2", "d3"}}
		if diff := cmp.Diff(want, f.pipelines()); diff != "" {
			t.Fatalf("pipelines sent (-want +got):\n%s", diff)
		}
		f.answer()
		for i, c := range []string{"b", "c", "d"} {
			r := <-later[i]
			if want := []string{c + "1", c + "2", c + "3"}; r.err != nil || !cmp.Equal(r.vals, want) {
				t.Errorf("call %s: Do = %v, %v; want %v, nil", c, r.vals, r.err, want)
			}
		}
	})
}

// TestMaxBatchSplitsBetweenCalls: a pipeline holds whole calls up to the
// bound; a call larger than the bound still goes whole.
func TestMaxBatchSplitsBetweenCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 3)
		var res []<-chan result
		res = append(res, do(t.Context(), b, "a"))
		synctest.Wait()
		for _, names := range [][]string{{"b1", "b2"}, {"c1", "c2"}, {"d1", "d2", "d3", "d4"}, {"e"}} {
			res = append(res, do(t.Context(), b, names...))
			synctest.Wait()
		}
		for range 5 {
			f.answer()
			synctest.Wait()
		}
		want := [][]string{{"a"}, {"b1", "b2"}, {"c1", "c2"}, {"d1", "d2", "d3", "d4"}, {"e"}}
		if diff := cmp.Diff(want, f.pipelines()); diff != "" {
			t.Fatalf("pipelines sent (-want +got):\n%s", diff)
		}
		for _, r := range res {
			if r := <-r; r.err != nil {
				t.Error(r.err)
			}
		}
	})
}

// TestFailedPipelineFailsOnlyItsCommands: a pipeline that fails answers
// its own commands with the error; the next one, queued meanwhile, is
// sent and answered.
func TestFailedPipelineFailsOnlyItsCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		broken := errors.New("connection reset")
		a := do(t.Context(), b, "a")
		synctest.Wait()
		c := do(t.Context(), b, "c")
		synctest.Wait()
		f.fail(broken)
		if r := <-a; !errors.Is(r.err, broken) {
			t.Errorf("call in the failed pipeline: err = %v, want %v", r.err, broken)
		}
		f.answer()
		if r := <-c; r.err != nil || !cmp.Equal(r.vals, []string{"c"}) {
			t.Errorf("call in the next pipeline: Do = %v, %v; want [c], nil", r.vals, r.err)
		}
	})
}

// TestRedisErrorAnswersItsCommandOnly: an error reply (NOSCRIPT, a
// script's error) is one command's; the other calls in the pipeline get
// their answers.
func TestRedisErrorAnswersItsCommandOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		first := do(t.Context(), b, "first")
		synctest.Wait()
		bad := do(t.Context(), b, "bad")
		synctest.Wait()
		good := do(t.Context(), b, "good")
		synctest.Wait()
		f.answer()
		<-first
		synctest.Wait()
		noScript := redis.ErrNoScript
		f.gate <- func(cmds []redis.Cmder) {
			answerNames(cmds)
			cmds[0].SetErr(noScript)
		}
		if r := <-bad; !errors.Is(r.err, noScript) {
			t.Errorf("bad: err = %v, want NOSCRIPT", r.err)
		}
		if r := <-good; r.err != nil || !cmp.Equal(r.vals, []string{"good"}) {
			t.Errorf("good: Do = %v, %v; want [good], nil", r.vals, r.err)
		}
	})
}

// TestCancelledWaiterLeavesAtOnce: a caller whose context ends while it
// waits gets ctx.Err() at once; its commands are left out of the next
// pipeline, and the other callers are answered as if it had never come.
func TestCancelledWaiterLeavesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		first := do(t.Context(), b, "a")
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		gone := do(ctx, b, "gone")
		stays := do(t.Context(), b, "stays")
		synctest.Wait()
		cancel()
		if r := <-gone; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled caller: err = %v, want context.Canceled", r.err)
		}
		f.answer()
		<-first
		synctest.Wait()
		f.answer()
		if r := <-stays; r.err != nil || !cmp.Equal(r.vals, []string{"stays"}) {
			t.Errorf("other caller: Do = %v, %v; want [stays], nil", r.vals, r.err)
		}
		if diff := cmp.Diff([][]string{{"a"}, {"stays"}}, f.pipelines()); diff != "" {
			t.Fatalf("pipelines sent (-want +got):\n%s", diff)
		}
	})
}

// TestCancelledCallerInFlightDoesNotCancelThePipeline: the caller of a
// pipeline in flight may leave (ctx.Err() at once) without cancelling the
// pipeline the others share; its deadline is the latest of theirs.
func TestCancelledCallerInFlightDoesNotCancelThePipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		first := do(t.Context(), b, "a")
		synctest.Wait()
		ctx1, cancel1 := context.WithTimeout(t.Context(), time.Minute)
		ctx2, cancel2 := context.WithTimeout(t.Context(), time.Hour)
		defer cancel2()
		r1 := do(ctx1, b, "b")
		r2 := do(ctx2, b, "c")
		synctest.Wait()
		f.answer()
		<-first
		synctest.Wait()
		cancel1()
		if r := <-r1; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled caller: err = %v, want context.Canceled", r.err)
		}
		f.mu.Lock()
		pctx := f.ctxs[1]
		f.mu.Unlock()
		if pctx.Err() != nil {
			t.Fatalf("the shared pipeline's context ended with one caller's: %v", pctx.Err())
		}
		if d, _ := pctx.Deadline(); !d.Equal(time.Now().Add(time.Hour)) {
			t.Errorf("pipeline deadline %v, want the latest caller's, %v", d, time.Now().Add(time.Hour))
		}
		f.answer()
		if r := <-r2; r.err != nil || !cmp.Equal(r.vals, []string{"c"}) {
			t.Errorf("other caller: Do = %v, %v; want [c], nil", r.vals, r.err)
		}
	})
}

// TestEndedContextIsNotSent: a call whose context has already ended
// returns its error and sends nothing.
func TestEndedContextIsNotSent(t *testing.T) {
	f := newFake()
	b := New(f, 0)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Do(ctx, cmd("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if got := f.pipelines(); len(got) != 0 {
		t.Fatalf("sent %v, want nothing", got)
	}
}

// TestPanicInClientFailsItsBatch: a client that panics fails the commands
// of the pipeline it was sending, and the Batcher goes on with the next.
func TestPanicInClientFailsItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := New(f, 0)
		a := do(t.Context(), b, "a")
		synctest.Wait()
		f.gate <- func([]redis.Cmder) { panic("client bug") }
		if r := <-a; r.err == nil {
			t.Fatal("the call whose pipeline panicked succeeded")
		}
		c := do(t.Context(), b, "c")
		synctest.Wait()
		f.answer()
		if r := <-c; r.err != nil || !cmp.Equal(r.vals, []string{"c"}) {
			t.Errorf("next call: Do = %v, %v; want [c], nil", r.vals, r.err)
		}
	})
}
