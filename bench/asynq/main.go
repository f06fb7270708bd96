// Command asynqbench measures asynq on the same Redis and receiver as
// bench/sender.sh's other runs: N tasks of a 500-byte payload queued
// (Redis memory read before and after), then processed by C workers that
// POST each payload to the receiver. It lives in its own module so that
// asynq stays out of hookgate's go.mod.
//
//	asynqbench -redis 127.0.0.1:6379 -receiver http://127.0.0.1:9000 -n 20000 -c 20
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

func usedMemory(ctx context.Context, rdb *redis.Client) int64 {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func count(url string) int64 {
	resp, err := http.Get(url + "/count")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	rcv := flag.String("receiver", "http://127.0.0.1:9000", "the receiver")
	n := flag.Int("n", 20000, "tasks")
	c := flag.Int("c", 20, "workers")
	flag.Parse()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	req, _ := http.NewRequest(http.MethodDelete, *rcv+"/count", nil)
	http.DefaultClient.Do(req)

	opt := asynq.RedisClientOpt{Addr: *addr}
	client := asynq.NewClient(opt)
	defer client.Close()
	payload := []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 500-44) + `"}`)
	before := usedMemory(ctx, rdb)
	for i := range *n {
		t := asynq.NewTask("webhook", payload)
		if _, err := client.Enqueue(t, asynq.TaskID(fmt.Sprintf("evt_%08d", i)), asynq.MaxRetry(7)); err != nil {
			log.Fatal(err)
		}
	}
	after := usedMemory(ctx, rdb)

	// A connection per worker, as hookgate's sender keeps (the default of
	// two idle connections per host would open one for most deliveries).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = *c
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: transport}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: *c, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("webhook", func(ctx context.Context, t *asynq.Task) error {
		resp, err := httpc.Post(*rcv+"/hooks", "application/json", bytes.NewReader(t.Payload()))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	for count(*rcv) < int64(*n) {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	srv.Shutdown()
	fmt.Printf("asynq deliveries/s %.0f bytes/envelope %.0f\n", float64(*n)/elapsed.Seconds(), float64(after-before)/float64(*n))
}
