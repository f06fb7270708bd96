package caddymodule

import (
	"context"
	"sync"
	"time"

	"github.com/hookgate/hookgate/reconcile"
)

// Scheduled reconcile runs (reconcile.Schedule): each job with `every`
// runs in the gateway at the start of every slot, one instance at a time
// under a claim in the state store (reconcile.StoreLocker).

// startSchedules starts a loop per job with `every`.
func (a *App) startSchedules() {
	var schedules []*reconcile.Schedule
	for _, j := range a.Reconcile {
		if j.Every <= 0 {
			continue
		}
		s := &reconcile.Schedule{
			Job:      j.Job(),
			Every:    time.Duration(j.Every),
			Locker:   reconcile.StoreLocker{Store: a.store},
			Logger:   zapslogLogger(a.logger),
			Observer: a.metrics.Reconcile(),
		}
		if j.Repair != nil {
			s.Enqueuer = reconcile.SenderEnqueuer{Sender: a, Destination: j.Repair.Destination}
			s.Limit = j.Repair.Limit
		}
		schedules = append(schedules, s)
	}
	if len(schedules) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	wg := new(sync.WaitGroup)
	a.stopSchedules = func() { cancel(); wg.Wait() }
	for _, s := range schedules {
		wg.Go(func() { s.Run(ctx) })
	}
}
