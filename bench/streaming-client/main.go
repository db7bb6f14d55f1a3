// streaming-client: holds N Mastodon streaming WebSockets and times the `update` events a
// driver announces (bench/streaming, issue 36 item 1).
//
//	streaming-client -url http://127.0.0.1:PORT -tokens FILE -n 10000 -k 20 \
//	    -mix user,public,hashtag:bench -expect user,public,hashtag -sources 8
//
// Connection i uses token i%len(tokens) and stream mix[i%len(mix)]
// (`/api/v1/streaming?stream=…[&tag=…]&access_token=…`), dialled from 127.0.0.(1+i%sources)
// so the ephemeral ports of one source address never bound the run. Once every dial is done it
// prints one JSON line `{"held":…,"failed":…,…}` and reads commands on stdin:
//
//	sent I T   post I (0 ≤ I < k, its content carries `zqn<I>q`) was sent at T (Unix ns)
//	end MS     wait at most MS ms for the announced posts still missing, then print the
//	           result as one JSON line and exit
//
// A connection receives post I when an `update` message whose payload contains `zqn<I>q`
// arrives; its latency is arrival - T. Only connections whose stream kind is in -expect count
// (GoToSocial 0.18 accepts `public` and `hashtag` streams but sends nothing on them).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

type conn struct {
	kind    string
	arrived []int64 // Unix ns of post I's first arrival, 0 while missing
	closed  atomic.Bool
	code    atomic.Int64 // close code the server sent, if any
}

func main() {
	base := flag.String("url", "", "server base URL (http://host:port)")
	tokensFile := flag.String("tokens", "", "file of access tokens, one a line")
	n := flag.Int("n", 1000, "connections")
	k := flag.Int("k", 20, "posts the driver will announce")
	mix := flag.String("mix", "user,public,hashtag:bench", "stream kinds, round-robin")
	expect := flag.String("expect", "user,public,hashtag", "kinds expected to receive the posts")
	sources := flag.Int("sources", 8, "local source addresses 127.0.0.1..N")
	parallel := flag.Int("parallel", 64, "dials in flight")
	flag.Parse()

	raw, err := os.ReadFile(*tokensFile)
	if err != nil {
		fail(err)
	}
	tokens := strings.Fields(string(raw))
	if len(tokens) == 0 {
		fail(fmt.Errorf("no tokens in %s", *tokensFile))
	}
	u, err := url.Parse(*base)
	if err != nil {
		fail(err)
	}
	kinds := strings.Split(*mix, ",")
	want := map[string]bool{}
	for _, e := range strings.Split(*expect, ",") {
		want[e] = true
	}

	conns := make([]*conn, *n)
	var held, failed atomic.Int64
	errs := map[string]int{}
	var errMu sync.Mutex
	sem := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *n; i++ {
		kind := kinds[i%len(kinds)]
		name, tag, _ := strings.Cut(kind, ":")
		q := url.Values{"stream": {name}, "access_token": {tokens[i%len(tokens)]}}
		if tag != "" {
			q.Set("tag", tag)
		}
		target := url.URL{Scheme: "ws", Host: u.Host, Path: "/api/v1/streaming", RawQuery: q.Encode()}
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%*sources))}
		d := websocket.Dialer{
			NetDial: (&net.Dialer{LocalAddr: local, Timeout: 60 * time.Second}).Dial,
			// Small buffers: the client must be cheap next to the server it measures.
			ReadBufferSize: 2048, WriteBufferSize: 512, HandshakeTimeout: 120 * time.Second,
		}
		c := &conn{kind: name, arrived: make([]int64, *k)}
		conns[i] = c
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, resp, err := d.Dial(target.String(), nil)
			<-sem
			if err != nil {
				failed.Add(1)
				c.closed.Store(true)
				msg := err.Error()
				if resp != nil {
					msg = "HTTP " + resp.Status
				} else if i := strings.LastIndex(msg, ": "); i >= 0 {
					msg = msg[i+2:]
				}
				errMu.Lock()
				errs[msg]++
				errMu.Unlock()
				return
			}
			held.Add(1)
			go read(ws, c)
		}()
	}
	wg.Wait()
	opened := time.Since(start)
	// Give the server a moment to subscribe the last streams (hollo subscribes after the
	// upgrade; an event before that is not the stream's).
	time.Sleep(2 * time.Second)
	alive := 0
	for _, c := range conns {
		if !c.closed.Load() {
			alive++
		}
	}
	out(map[string]any{"held": alive, "dialled_ok": held.Load(), "failed": failed.Load(),
		"errors": errs, "open_s": opened.Seconds()})

	sent := make([]int64, *k)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 3 && f[0] == "sent" {
			i, _ := strconv.Atoi(f[1])
			t, _ := strconv.ParseInt(f[2], 10, 64)
			if i >= 0 && i < *k {
				sent[i] = t
			}
		} else if len(f) == 2 && f[0] == "end" {
			ms, _ := strconv.Atoi(f[1])
			finish(conns, sent, want, time.Duration(ms)*time.Millisecond)
			return
		}
	}
}

func read(ws *websocket.Conn, c *conn) {
	defer ws.Close()
	defer c.closed.Store(true)
	marker := []byte("zqn")
	// One buffer per connection, reused for every message: the client is the instrument and
	// shares the 2 cores with the server it measures, so it should not spend them on
	// allocations and garbage collection (a fresh bytes.Buffer per message grew 512 → 4 KiB
	// through four allocations).
	buf := make([]byte, 0, 8<<10)
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			if e, ok := err.(*websocket.CloseError); ok {
				c.code.Store(int64(e.Code))
			}
			return
		}
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
		}
		now := time.Now().UnixNano()
		b := buf
		if !bytes.Contains(b, []byte(`"event":"update"`)) {
			continue
		}
		// The nonce `zqn<I>q` in the status content.
		j := bytes.Index(b, marker)
		if j < 0 {
			continue
		}
		rest := b[j+3:]
		e := bytes.IndexByte(rest, 'q')
		if e <= 0 {
			continue
		}
		i, err := strconv.Atoi(string(rest[:e]))
		if err != nil || i < 0 || i >= len(c.arrived) {
			continue
		}
		if atomic.LoadInt64(&c.arrived[i]) == 0 {
			atomic.StoreInt64(&c.arrived[i], now)
		}
	}
}

func finish(conns []*conn, sent []int64, want map[string]bool, wait time.Duration) {
	complete := func() bool {
		for _, c := range conns {
			if !want[c.kind] || c.closed.Load() {
				continue
			}
			for i, t := range sent {
				if t != 0 && atomic.LoadInt64(&c.arrived[i]) == 0 {
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(wait)
	for !complete() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var lat []float64
	perKind := map[string][]float64{}
	// Each post's deliveries, to tell a slow post from a slow walk of the sockets.
	perPost := make([][]float64, len(sent))
	missed, missingClients, expecting, closed := 0, 0, 0, 0
	codes := map[string]int{}
	for _, c := range conns {
		if c.closed.Load() {
			closed++
			codes[strconv.FormatInt(c.code.Load(), 10)]++
		}
		if !want[c.kind] {
			continue
		}
		expecting++
		miss := false
		for i, t := range sent {
			if t == 0 {
				continue
			}
			a := atomic.LoadInt64(&c.arrived[i])
			if a == 0 {
				missed++
				miss = true
				continue
			}
			ms := float64(a-t) / 1e6
			lat = append(lat, ms)
			perKind[c.kind] = append(perKind[c.kind], ms)
			perPost[i] = append(perPost[i], ms)
		}
		if miss {
			missingClients++
		}
	}
	res := map[string]any{"deliveries": len(lat), "missed": missed,
		"clients_missing": missingClients, "expecting_clients": expecting,
		"closed": closed, "close_codes": codes}
	for k, v := range quantiles(lat) {
		res[k] = v
	}
	for kind, l := range perKind {
		q := quantiles(l)
		res[kind+"_p50_ms"], res[kind+"_p99_ms"] = q["p50_ms"], q["p99_ms"]
	}
	// Per post: the first, the median and the last arrival (ms after its POST was sent).
	spread := make([][3]float64, 0, len(perPost))
	for _, l := range perPost {
		if len(l) == 0 {
			continue
		}
		q := quantiles(l)
		spread = append(spread, [3]float64{q["min_ms"], q["p50_ms"], q["max_ms"]})
	}
	res["per_post"] = spread
	out(res)
}

func quantiles(l []float64) map[string]float64 {
	if len(l) == 0 {
		return map[string]float64{"min_ms": -1, "p50_ms": -1, "p99_ms": -1, "max_ms": -1}
	}
	sort.Float64s(l)
	at := func(q float64) float64 { return l[int(q*float64(len(l)-1))] }
	return map[string]float64{"min_ms": l[0], "p50_ms": at(0.5), "p99_ms": at(0.99),
		"max_ms": l[len(l)-1]}
}

func out(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "streaming-client:", err)
	os.Exit(2)
}
