// httpget GETs a URL from inside a pod.
//
//	httpget -wait 60s URL        retry until a 200 (or the deadline); print status and body
//	httpget -poll 100ms -for 60s URL
//	                             one request every -poll for -for; print every failure and a
//	                             summary line "requests=N failures=M max_latency=D"; exit 1 on
//	                             any failure
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), err
}

func main() {
	wait := flag.Duration("wait", 0, "retry until a 200 for this long")
	poll := flag.Duration("poll", 0, "poll interval (poll mode)")
	dur := flag.Duration("for", 0, "how long to poll (poll mode)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: httpget [-wait D | -poll D -for D] URL")
		os.Exit(2)
	}
	url := flag.Arg(0)
	c := &http.Client{Timeout: 2 * time.Second}
	if *poll > 0 {
		n, failed := 0, 0
		var slowest time.Duration
		end := time.Now().Add(*dur)
		for time.Now().Before(end) {
			n++
			t0 := time.Now()
			code, _, err := get(c, url)
			if d := time.Since(t0); d > slowest {
				slowest = d
			}
			if err != nil || code != 200 {
				failed++
				fmt.Printf("%s failure: status=%d err=%v\n", time.Now().UTC().Format(time.RFC3339Nano), code, err)
			}
			time.Sleep(*poll)
		}
		fmt.Printf("requests=%d failures=%d max_latency=%s\n", n, failed, slowest.Round(time.Millisecond))
		if failed > 0 {
			os.Exit(1)
		}
		return
	}
	end := time.Now().Add(*wait)
	for {
		code, body, err := get(c, url)
		if err == nil && code == 200 {
			fmt.Printf("%d %s\n", code, body)
			return
		}
		if time.Now().After(end) {
			fmt.Printf("status=%d err=%v body=%s\n", code, err, body)
			os.Exit(1)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
