package soak

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/mailbox"
)

// The kinds of mail the soak reads.
const (
	kindSignIn  = "sign-in"
	kindConfirm = "confirm"
	// kindNotice is the notice of a confirmed change, to the address the
	// account left, with its undo link.
	kindNotice = "notice"
	kindOther  = "other"
)

var (
	signInCode  = regexp.MustCompile(`/sign-in\?code=([a-z2-7]+)`)
	confirmCode = regexp.MustCompile(`/confirm-email\?code=([a-z2-7]+)`)
	undoCode    = regexp.MustCompile(`/undo-email\?code=([a-z2-7]+)`)
)

// mail is one mail received, by the Message-ID of its first arrival.
type mail struct {
	id, to, kind, code string
	at                 time.Time
}

// mailServer is an SMTP server on loopback that keeps what it receives
// and refuses every recipient while told to.
type mailServer struct {
	url string
	srv *mailbox.Server
	l   net.Listener

	mu         sync.Mutex
	byID       map[string]mail
	byTo       map[string][]mail
	repeats    int
	conflicts  []string
	noID       int
	arrived    chan struct{} // closed and replaced at each new mail
	refusing   bool
	totalCount int
}

func startMailServer() (*mailServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak: smtp listen: %w", err)
	}
	m := &mailServer{url: "smtp://" + l.Addr().String(), l: l,
		byID: map[string]mail{}, byTo: map[string][]mail{}, arrived: make(chan struct{})}
	m.srv = mailbox.New(m.deliver)
	go func() { _ = m.srv.Serve(l) }()
	return m, nil
}

func (m *mailServer) close() { _ = m.srv.Close() }

// refuse turns the refusal of every recipient (451, try again later) on or
// off.
func (m *mailServer) refuse(on bool) {
	m.mu.Lock()
	m.refusing = on
	m.mu.Unlock()
	if on {
		m.srv.Refuse(451, "soak: mail server unavailable for a moment")
	} else {
		m.srv.Refuse(0, "")
	}
}

func (m *mailServer) deliver(msg mailbox.Message) {
	id := strings.Trim(msg.Header.Get("Message-Id"), "<>")
	x := mail{id: id, kind: kindOther, at: time.Now()}
	if len(msg.To) > 0 {
		x.to = strings.ToLower(strings.Trim(msg.To[0], "<>"))
	}
	if c := signInCode.FindStringSubmatch(msg.Text); c != nil {
		x.kind, x.code = kindSignIn, c[1]
	} else if c := confirmCode.FindStringSubmatch(msg.Text); c != nil {
		x.kind, x.code = kindConfirm, c[1]
	} else if c := undoCode.FindStringSubmatch(msg.Text); c != nil {
		x.kind, x.code = kindNotice, c[1]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.totalCount++
	if id == "" {
		m.noID++
		return
	}
	if first, ok := m.byID[id]; ok {
		m.repeats++
		if first.to != x.to || first.code != x.code || first.kind != x.kind {
			m.conflicts = append(m.conflicts, fmt.Sprintf("Message-ID %s came twice with different contents (%s, %s)", id, first.kind, x.kind))
		}
		return
	}
	m.byID[id] = x
	m.byTo[x.to] = append(m.byTo[x.to], x)
	close(m.arrived)
	m.arrived = make(chan struct{})
}

// next waits for a mail of kind to the address whose Message-ID is not in
// taken, and adds it there.
func (m *mailServer) next(ctx context.Context, to, kind string, taken map[string]bool) (mail, error) {
	for {
		m.mu.Lock()
		for _, x := range m.byTo[to] {
			if x.kind == kind && !taken[x.id] {
				m.mu.Unlock()
				taken[x.id] = true
				return x, nil
			}
		}
		wait := m.arrived
		m.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return mail{}, fmt.Errorf("no %s mail arrived: %w", kind, ctx.Err())
		}
	}
}

// count is how many distinct mails arrived.
func (m *mailServer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// received returns the distinct mails by address and kind, and the repeats.
func (m *mailServer) received() (byKey map[string]int, repeats int, problems []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byKey = map[string]int{}
	for _, x := range m.byID {
		byKey[x.to+" "+x.kind]++
	}
	problems = slicesClone(m.conflicts)
	if m.noID > 0 {
		problems = append(problems, fmt.Sprintf("%d mails came without a Message-ID", m.noID))
	}
	return byKey, m.repeats, problems
}
