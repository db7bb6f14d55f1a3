// httpget GETs a URL from inside a pod.
//
//	httpget -wait 60s URL        retry until a 200 (or the deadline); print status and body
//	httpget -poll 100ms -for 60s URL
//	                             one request every -poll for -for; print every failure and a
//	                             summary line "requests=N failures=M max_latency=D"; exit 1 on
//	                             any failure. A failure line says how far the request got (DNS,
//	                             connect, request written) and when, from its start.
//	httpget -poll 100ms -for 60s -unavailable-ok URL
//	                             the same, but a 503 carrying Retry-After (the maintenance page of
//	                             issue 34) is counted as "unavailable", not as a failure; the
//	                             summary line then ends with " unavailable=K".
//	httpget -poll 100ms -for 200s -stop-file /stop/now URL
//	                             the same, but it also ends (with its summary) as soon as
//	                             /stop/now exists: -for is the upper bound, and a scenario ends
//	                             the client when what it watched is over instead of waiting it out
//	httpget -touch /stop/now     creates that file (run in the client's pod with kubectl exec:
//	                             the image holds nothing else)
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"
)

// steps records what a request went through, with offsets from its start.
type steps struct {
	mu    sync.Mutex
	start time.Time
	seen  []string
}

func (s *steps) add(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, fmt.Sprintf("+%dms ", time.Since(s.start).Milliseconds())+fmt.Sprintf(format, args...))
}

func (s *steps) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.seen, ", ")
}

func (s *steps) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn:  func(string) { s.add("get conn") },
		DNSStart: func(i httptrace.DNSStartInfo) { s.add("dns %s", i.Host) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			s.add("dns done %v err=%v", i.Addrs, i.Err)
		},
		ConnectStart: func(_, addr string) { s.add("connect %s", addr) },
		ConnectDone: func(_, addr string, err error) {
			s.add("connected %s err=%v", addr, err)
		},
		GotConn: func(i httptrace.GotConnInfo) {
			s.add("got conn local=%v reused=%v", i.Conn.LocalAddr(), i.Reused)
		},
		WroteRequest:         func(i httptrace.WroteRequestInfo) { s.add("wrote request err=%v", i.Err) },
		GotFirstResponseByte: func() { s.add("first byte") },
	}
}

func get(c *http.Client, url string) (int, string, error) {
	return getTraced(c, url, nil)
}

// lastRetryAfter is the Retry-After header of the last response getTraced read.
var lastRetryAfter string

func getTraced(c *http.Client, url string, s *steps) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if s != nil {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), s.trace()))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	lastRetryAfter = resp.Header.Get("Retry-After")
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), err
}

func main() {
	wait := flag.Duration("wait", 0, "retry until a 200 for this long")
	poll := flag.Duration("poll", 0, "poll interval (poll mode)")
	dur := flag.Duration("for", 0, "how long to poll (poll mode)")
	unavailableOK := flag.Bool("unavailable-ok", false, "count a 503 with Retry-After as unavailable, not failed (poll mode)")
	stopFile := flag.String("stop-file", "", "end polling once this file exists (poll mode)")
	touch := flag.String("touch", "", "create this file and exit")
	flag.Parse()
	if *touch != "" {
		if err := os.WriteFile(*touch, nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: httpget [-wait D | -poll D -for D] URL")
		os.Exit(2)
	}
	url := flag.Arg(0)
	c := &http.Client{Timeout: 2 * time.Second}
	if *poll > 0 {
		n, failed, unavailable := 0, 0, 0
		var slowest time.Duration
		end := time.Now().Add(*dur)
		for time.Now().Before(end) {
			if *stopFile != "" {
				if _, err := os.Stat(*stopFile); err == nil {
					break
				}
			}
			n++
			s := &steps{start: time.Now()}
			code, _, err := getTraced(c, url, s)
			if d := time.Since(s.start); d > slowest {
				slowest = d
			}
			if err == nil && code == 503 && *unavailableOK && lastRetryAfter != "" {
				unavailable++
			} else if err != nil || code != 200 {
				failed++
				fmt.Printf("%s failure: status=%d err=%v; started %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), code, err, s.start.UTC().Format("15:04:05.000"), s)
			}
			time.Sleep(*poll)
		}
		if *unavailableOK {
			fmt.Printf("requests=%d failures=%d max_latency=%s unavailable=%d\n", n, failed, slowest.Round(time.Millisecond), unavailable)
		} else {
			fmt.Printf("requests=%d failures=%d max_latency=%s\n", n, failed, slowest.Round(time.Millisecond))
		}
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
