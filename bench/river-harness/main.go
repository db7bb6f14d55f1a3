// river-harness: the stand-in for `river bench` used by bench/compare, because River's CLI
// module (github.com/riverqueue/river/cmd/river) is not served by the Go module proxy this
// project can reach. It drives River's public library API (pinned in go.mod) the way
// `river bench --num-total-jobs N` does — fetch cooldown 2 ms, poll 20 ms, jobs inserted in
// batches of 5,000 before the clients start, throughput counted from client start to the last
// completion event — but with the worker shape of hollo-bench: --clients River clients, each
// with its own pgx pool and --max-workers slots, like that many worker processes.
//
// Last line: river_jobs=N clients=W max_workers=C elapsed_s=S jobs_s=J
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[noopArgs]) error { return nil }

func main() {
	url := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	jobs := flag.Int("jobs", 20000, "jobs to insert and work")
	clients := flag.Int("clients", 2, "River clients, each with its own pool")
	maxWorkers := flag.Int("max-workers", 10, "MaxWorkers per client")
	poolSize := flag.Int("pool", 20, "connections per client pool")
	flag.Parse()
	if err := run(*url, *jobs, *clients, *maxWorkers, *poolSize); err != nil {
		fmt.Fprintln(os.Stderr, "river-harness:", err)
		os.Exit(1)
	}
}

func run(url string, jobs, clients, maxWorkers, poolSize int) error {
	ctx := context.Background()
	newPool := func() (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = int32(poolSize)
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	setup, err := newPool()
	if err != nil {
		return err
	}
	defer setup.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(setup), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate-up: %w", err)
	}
	if _, err := setup.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	var worked atomic.Int64
	done := make(chan struct{})
	var lastAt atomic.Int64
	list := make([]*river.Client[pgx.Tx], 0, clients)
	for i := 0; i < clients; i++ {
		pool, err := newPool()
		if err != nil {
			return err
		}
		defer pool.Close()
		c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			FetchCooldown:     2 * time.Millisecond,
			FetchPollInterval: 20 * time.Millisecond,
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
			Workers:           workers,
		})
		if err != nil {
			return err
		}
		events, cancel := c.SubscribeConfig(&river.SubscribeConfig{
			ChanSize: jobs + 1000,
			Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
		})
		defer cancel()
		go func() {
			for ev := range events {
				if ev == nil {
					return
				}
				lastAt.Store(time.Now().UnixNano())
				if worked.Add(1) == int64(jobs) {
					close(done)
				}
			}
		}()
		list = append(list, c)
	}

	batch := make([]river.InsertManyParams, 0, 5000)
	for n := 0; n < jobs; {
		batch = batch[:0]
		for len(batch) < 5000 && n < jobs {
			n++
			batch = append(batch, river.InsertManyParams{Args: noopArgs{Num: n}})
		}
		if _, err := list[0].InsertMany(ctx, batch); err != nil {
			return err
		}
	}
	if _, err := setup.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
		return err
	}

	start := time.Now()
	for _, c := range list {
		if err := c.Start(ctx); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("timed out with %d of %d jobs worked", worked.Load(), jobs)
	}
	elapsed := time.Duration(lastAt.Load() - start.UnixNano())
	for _, c := range list {
		_ = c.Stop(ctx)
	}
	fmt.Printf("river_jobs=%d clients=%d max_workers=%d elapsed_s=%.3f jobs_s=%.0f\n",
		jobs, clients, maxWorkers, elapsed.Seconds(), float64(jobs)/elapsed.Seconds())
	return nil
}
