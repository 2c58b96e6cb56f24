package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Message is one error-level message of a tab's console.
type Message struct {
	// Kind tells where the message came from: "console.error" or
	// "console.assert" for a call of the console API, "exception" for an
	// uncaught exception or an unhandled rejection, and "log/SOURCE" for an
	// entry of the browser's log, such as "log/security" for a violation of
	// the Content-Security-Policy or "log/network" for a failed request.
	Kind string
	// Text is the message as the DevTools console shows it.
	Text string
	// URL and Line tell where the message came from, when the browser
	// says; Line counts from 1 and is 0 when unknown.
	URL  string
	Line int64
}

// String returns the kind, the text and the place of the message.
func (m Message) String() string {
	s := m.Kind + ": " + m.Text
	switch {
	case m.URL != "" && m.Line > 0:
		s += fmt.Sprintf(" (%s:%d)", m.URL, m.Line)
	case m.URL != "":
		s += " (" + m.URL + ")"
	}
	return s
}

// ConsoleErrors returns the error-level messages of the tab of ctx, a
// context from [New] or [NewTab], that appeared since the tab opened or
// since the last call, and takes them: they no longer fail the test when it
// ends. A test that provokes an error on purpose checks it here; any other
// test need not call it. A failed request for /favicon.ico, which the
// browser makes on its own when a page names no icon, is an error too, as
// DevTools and Lighthouse count it. Every message that the browser sent
// before the call is in the result. ConsoleErrors fails t when the tab does not answer.
func ConsoleErrors(t testing.TB, ctx context.Context) []Message {
	t.Helper()
	tb := tabOf(ctx)
	if tb == nil {
		t.Fatal("browsertest: ConsoleErrors needs a context from browsertest.New or NewTab")
	}
	if err := settle(ctx); err != nil {
		t.Fatalf("browsertest: console errors: %v", err)
	}
	return tb.take()
}

// settle makes a round trip to the page of ctx's tab. The events that the
// page sent before its answer then have reached the tab's listener, which
// chromedp calls in order, before the answer is read.
func settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(ctx))
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`0`)); err != nil {
		return fmt.Errorf("reach the page: %w", err)
	}
	return nil
}

// take returns the messages so far and forgets them.
func (tb *tab) take() []Message {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	m := tb.messages
	tb.messages = nil
	return m
}

// reportLeft fails t with each error-level message that nobody took.
func (tb *tab) reportLeft(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := settle(ctx); err != nil {
		t.Logf("browsertest: the last console messages may be missing: %v", err)
	}
	left := tb.take()
	if len(left) == 0 {
		return
	}
	lines := make([]string, len(left))
	for i, m := range left {
		lines[i] = "\t" + m.String()
	}
	t.Errorf("browsertest: the page logged %d console error(s):\n%s", len(left), strings.Join(lines, "\n"))
}

// listen keeps the error-level messages of the tab's events. chromedp calls
// it in the tab's read loop, so it must return fast and send no command.
func (tb *tab) listen(ev any) {
	var m Message
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		m = Message{Kind: "console." + string(ev.Type), Text: argsText(ev.Args)}
		if st := ev.StackTrace; st != nil && len(st.CallFrames) > 0 {
			m.URL, m.Line = st.CallFrames[0].URL, st.CallFrames[0].LineNumber+1
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		m = Message{Kind: "exception", Text: d.Text, URL: d.URL, Line: d.LineNumber + 1}
		if d.Exception != nil {
			desc, _, _ := strings.Cut(valueText(d.Exception), "\n")
			m.Text = strings.TrimSpace(d.Text + " " + desc)
		}
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError {
			return
		}
		m = Message{Kind: "log/" + string(e.Source), Text: e.Text, URL: e.URL, Line: e.LineNumber}
		if e.LineNumber > 0 {
			// The log's lines count from 0, as the protocol's others do;
			// 0 is also what an entry without a line has.
			m.Line = e.LineNumber + 1
		}
	default:
		return
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.messages = append(tb.messages, m)
}

// argsText joins the arguments of a console call as text.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = valueText(a)
	}
	return strings.Join(parts, " ")
}

// valueText renders one value: a string as it is, another value by its
// description or its JSON.
func valueText(o *runtime.RemoteObject) string {
	if o.Type == runtime.RemoteObjectTypeString {
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
	}
	switch {
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return string(o.Type)
}
