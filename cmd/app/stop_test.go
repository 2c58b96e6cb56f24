package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// A stop under load, as SIGTERM starts it (main turns the signal into the
// end of run's context): /readyz answers 503 at once while the API goes on
// serving for SHUTDOWN_DELAY; a request in flight when the listener closes
// finishes; every request answered was accepted (202); deliveries in
// flight finish, or are released when the grace runs out, with no attempt
// spent and nothing buried; run returns nil within SHUTDOWN_GRACE. Every
// address accepted has its mail delivered or still in the outbox, and
// once the app runs again every one arrives, repeats only with the same
// Message-ID.
func TestStopUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	for name, url := range testDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stopUnderLoad(t, url(t))
		})
	}
}

func stopUnderLoad(t *testing.T, databaseURL string) {
	const grace = 10 * time.Second
	mx := smtptest.NewServer(t)
	mx.Hold()
	env := map[string]string{
		"DATABASE_URL":    databaseURL,
		"DATA_KEY":        testDataKey,
		"HTTP_ADDR":       "127.0.0.1:0",
		"SMTP_URL":        mx.URL(),
		"HTTP_RATE_LIMIT": "0",
		"SWEEP_INTERVAL":  "0",
		"SHUTDOWN_GRACE":  grace.String(),
		"SHUTDOWN_DELAY":  "2s",
	}
	app := e2eStart(t, env)
	stopping := app.logs.seen(`msg=stopping`)
	closing := app.logs.seen(`msg="http closing its listener`)

	// Load: workers ask for links for fresh addresses until the service
	// is gone, each noting what it was answered.
	var (
		mu        sync.Mutex
		accepted  []string
		unwelcome []string
		// unanswered are the addresses whose request got no answer, and
		// what the client said.
		unanswered = map[string]error{}
		stopped    atomic.Bool
		afterStop  atomic.Int64
	)
	quit := make(chan struct{})
	var workers sync.WaitGroup
	stopLoad := sync.OnceFunc(func() {
		close(quit)
		workers.Wait()
	})
	defer stopLoad()
	for w := range 4 {
		workers.Go(func() {
			client := &http.Client{Timeout: e2eWait}
			for n := 0; ; n++ {
				select {
				case <-quit:
					return
				default:
				}
				addr := fmt.Sprintf("load-%d-%d@example.com", w, n)
				resp, err := client.Post(app.base+"/v1/sign-in-links", "application/json", strings.NewReader(`{"email":"`+addr+`"}`))
				if err != nil {
					// Not accepted: the server never read it (a connection
					// it closed while idle), or the listener has closed.
					mu.Lock()
					unanswered[addr] = err
					mu.Unlock()
					select {
					case <-closing:
						return
					default:
						continue
					}
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode == http.StatusAccepted {
					accepted = append(accepted, addr)
					if stopped.Load() {
						afterStop.Add(1)
					}
				} else {
					unwelcome = append(unwelcome, fmt.Sprintf("%s: %d", addr, resp.StatusCode))
				}
				mu.Unlock()
			}
		})
	}

	// Deliveries in flight: the relay has handed mails to the SMTP server,
	// which holds them unanswered.
	for range 4 {
		select {
		case <-mx.Held():
		case <-time.After(e2eWait):
			t.Fatal("no delivery reached the SMTP server")
		}
	}

	// A request in flight across the listener's close: its headers now,
	// its body once the listener closes.
	held, err := net.Dial("tcp", strings.TrimPrefix(app.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	body := `{"email":"held@example.com"}`
	fmt.Fprintf(held, "POST /v1/sign-in-links HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		strings.TrimPrefix(app.base, "http://"), len(body))

	start := time.Now()
	stopped.Store(true)
	app.cancel()
	select {
	case <-stopping:
	case <-time.After(e2eWait):
		t.Fatal("the app did not log its stop")
	}
	resp, err := app.client.Get(app.base + "/readyz")
	if err != nil {
		t.Fatalf("/readyz right after the stop began: %v, want 503 while the API still serves", err)
	}
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(ready), "stopping") {
		t.Errorf("/readyz once stopping: %d %s, want 503 saying the service is stopping", resp.StatusCode, ready)
	}
	// Two of the deliveries in flight finish; the others are still held
	// when the grace runs out.
	mx.Release(2)

	select {
	case <-closing:
	case <-time.After(e2eWait):
		t.Fatal("the API did not close its listener")
	}
	if _, err := io.WriteString(held, body); err != nil {
		t.Fatalf("the body of the request in flight: %v", err)
	}
	heldResp, err := http.ReadResponse(bufio.NewReader(held), nil)
	if err != nil {
		t.Fatalf("the request in flight when the listener closed got no answer: %v", err)
	} else if heldResp.StatusCode != http.StatusAccepted {
		t.Errorf("the request in flight when the listener closed: %d, want 202", heldResp.StatusCode)
	} else {
		mu.Lock()
		accepted = append(accepted, "held@example.com")
		mu.Unlock()
	}

	select {
	case app.result = <-app.done:
		app.returned = true
	case <-time.After(grace + e2eWait):
		t.Fatalf("run did not return within %s of the stop", grace+e2eWait)
	}
	took := time.Since(start)
	if app.result != nil {
		t.Errorf("run after the stop: %v, want nil", app.result)
	}
	if took > grace+time.Second {
		t.Errorf("the stop took %s, want at most SHUTDOWN_GRACE (%s)", took.Round(time.Millisecond), grace)
	}
	stopLoad()
	delivered := mx.Messages()
	mx.ReleaseAll()

	mu.Lock()
	defer mu.Unlock()
	if len(unwelcome) > 0 {
		t.Errorf("%d requests failed: %v", len(unwelcome), unwelcome[:min(len(unwelcome), 10)])
	}
	if afterStop.Load() == 0 {
		t.Error("no request was accepted after the stop began; the API should serve for SHUTDOWN_DELAY")
	}

	// What the stop left: nothing buried, no attempt spent, and every
	// accepted address delivered or waiting.
	db, _, err := must(parseDatabaseURL(databaseURL)).open(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	left, err := db.Outbox().List(t.Context(), outbox.ListFilter{Now: time.Now(), Limit: 1 << 20})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	waiting := map[string]bool{}
	inOutbox := map[string]bool{}
	for _, r := range left {
		if !r.BuriedAt.IsZero() || r.Attempts != 0 {
			t.Errorf("message %s after the stop: attempts %d, buried at %v; want no attempt spent, none buried", r.ID, r.Attempts, r.BuriedAt)
		}
		var p struct{ To string }
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatal(err)
		}
		waiting[p.To] = true
		inOutbox[r.ID.String()] = true
	}
	got := map[string]bool{}
	for _, m := range delivered {
		got[m.To[0]] = true
		if id := messageIDOf(m); inOutbox[id] {
			t.Errorf("message %s was delivered before the exit but is still in the outbox: its acknowledgement was not written", id)
		}
	}
	if len(delivered) < 2 {
		t.Errorf("%d mails delivered during the stop, want the 2 let through", len(delivered))
	}
	for _, a := range accepted {
		if !got[a] && !waiting[a] {
			t.Errorf("%s was accepted but its mail is neither delivered nor in the outbox", a)
		}
	}
	for a, err := range unanswered {
		if got[a] || waiting[a] {
			t.Errorf("the request for %s got no answer (%v), yet it was carried out", a, err)
		}
	}
	t.Logf("%d requests accepted (%d after the stop began), %d not (no answer); %d mails delivered, %d left in the outbox; the stop took %s",
		len(accepted), afterStop.Load(), len(unanswered), len(delivered), len(left), took.Round(time.Millisecond))

	// Run again: every accepted address gets its mail, repeats only with
	// the same Message-ID.
	e2eStart(t, env)
	deadline := time.Now().Add(e2eWait)
	defer func() {
		if t.Failed() {
			t.Logf("after the stop the outbox held %d messages", len(left))
		}
	}()
	for {
		byAddr := map[string]map[string]bool{}
		for _, m := range mx.Messages() {
			if byAddr[m.To[0]] == nil {
				byAddr[m.To[0]] = map[string]bool{}
			}
			byAddr[m.To[0]][messageIDOf(m)] = true
		}
		var missing []string
		for _, a := range accepted {
			if len(byAddr[a]) == 0 {
				missing = append(missing, a)
			}
		}
		if len(missing) == 0 {
			for a, ids := range byAddr {
				if len(ids) > 1 {
					t.Errorf("%s got %d different Message-IDs, want repeats only of one", a, len(ids))
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d accepted addresses got no mail after the restart: %v", len(missing), len(accepted), missing[:min(len(missing), 10)])
		}
		select {
		case <-mx.Arrived():
		case <-time.After(time.Until(deadline)):
		}
	}
}

// messageIDOf returns the outbox message ID a mail's Message-ID carries.
func messageIDOf(m smtptest.Message) string {
	id, _, _ := strings.Cut(strings.Trim(m.Header.Get("Message-ID"), "<>"), "@")
	return id
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
