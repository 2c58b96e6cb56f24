package config_test

import (
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/user"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDescribeListsEveryVariable(t *testing.T) {
	t.Parallel()
	got := map[string]config.Var{}
	for _, v := range config.Describe() {
		if v.Description == "" {
			t.Errorf("%s has no description", v.Name)
		}
		got[v.Name] = v
	}
	for name, def := range map[string]string{
		"DATABASE_URL": "", "OUTBOX_INTERVAL": "1s", "OUTBOX_LEASE": "2m",
		"OUTBOX_TIMEOUT": "30s", "OUTBOX_BATCH": "10", "OUTBOX_MAX_ATTEMPTS": "8",
	} {
		v, ok := got[name]
		if !ok || v.Default != def {
			t.Errorf("%s: got %+v, want default %q", name, v, def)
		}
	}
}

// TestLoad reads the environment into a Config and refuses what cannot
// work.
func TestLoad(t *testing.T) {
	t.Parallel()
	t.Run("defaults", testLoadDefaults)
	t.Run("outbox variables", testLoadReadsOutboxVariables)
	t.Run("values that cannot work", testLoadRejectsValuesThatCannotWork)
	t.Run("broker URL", testLoadParsesBrokerURL)
	t.Run("never echoes a password", testLoadNeverEchoesAPassword)
	t.Run("base URL follows HTTP_ADDR unless set", testBaseURLFollowsHTTPAddrUnlessSet)
	t.Run("trusted proxies", testLoadParsesTrustedProxies)
	t.Run("the domain's defaults", testLoadKeepsTheDomainsDefaults)
}

// testLoadKeepsTheDomainsDefaults leaves the domains' variables unset and
// finds the defaults the domains write, once, in user.Policy.WithDefaults
// and org.Policy.WithDefaults.
func testLoadKeepsTheDomainsDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := user.Policy(c.Policy), (user.Policy{}).WithDefaults(); got != want {
		t.Errorf("policy %+v, want the domain's defaults %+v", got, want)
	}
	if got, want := org.Policy(c.OrgPolicy), (org.Policy{}).WithDefaults(); got != want {
		t.Errorf("organizations' policy %+v, want the domain's defaults %+v", got, want)
	}
	c, err = config.Load(getenv(map[string]string{"LINK_LIMIT": "3", "MAIL_BUDGET_WINDOW": "2h", "INVITATION_LIMIT": "50", "INVITATION_TTL": "48h"}))
	if err != nil {
		t.Fatal(err)
	}
	want := (user.Policy{LinkLimit: 3, MailBudgetWindow: 2 * time.Hour}).WithDefaults()
	if got := user.Policy(c.Policy); got != want {
		t.Errorf("policy %+v, want %+v", got, want)
	}
	wantOrg := (org.Policy{InvitationLimit: 50, InvitationTTL: 48 * time.Hour}).WithDefaults()
	if got := org.Policy(c.OrgPolicy); got != wantOrg {
		t.Errorf("organizations' policy %+v, want %+v", got, wantOrg)
	}
}

// TestDescribedDefaultsAreThoseInEffect sets each variable to the default
// that app config shows for it, and finds the configuration of no
// variable set: a default shown is the default in effect, whether an
// envDefault tag or the domain's code writes it.
func TestDescribedDefaultsAreThoseInEffect(t *testing.T) {
	t.Parallel()
	unset, err := config.Load(getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range config.Describe() {
		if v.Default == "" {
			continue
		}
		set, err := config.Load(getenv(map[string]string{v.Name: v.Default}))
		if err != nil {
			t.Errorf("%s=%s, its default: %v", v.Name, v.Default, err)
			continue
		}
		if !reflect.DeepEqual(set, unset) {
			t.Errorf("%s=%s, its default, loads %+v; unset it loads %+v", v.Name, v.Default, set, unset)
		}
	}
}

func testLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := outbox.RelayConfig{}.WithDefaults()
	if c.Outbox != want {
		t.Errorf("relay config %+v, want the seed's defaults %+v", c.Outbox, want)
	}
	if c.LogLevel != slog.LevelInfo || !c.Relay {
		t.Errorf("log level %v, relay %v", c.LogLevel, c.Relay)
	}
	// Sign-in codes are printed on the terminal when SMTP_URL is unset:
	// with nothing configured, the service is reachable from this machine
	// only.
	host, _, err := net.SplitHostPort(c.HTTPAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("HTTP_ADDR defaults to %q, want a loopback address", c.HTTPAddr)
	}
	if c.ShutdownGrace != 25*time.Second || c.ShutdownDelay != 0 {
		t.Errorf("shutdown grace %s, delay %s; want 25s and 0s", c.ShutdownGrace, c.ShutdownDelay)
	}
}

func testLoadReadsOutboxVariables(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(map[string]string{
		"OUTBOX_INTERVAL":     "250ms",
		"OUTBOX_LEASE":        "5m",
		"OUTBOX_TIMEOUT":      "10s",
		"OUTBOX_BATCH":        "500",
		"OUTBOX_MAX_ATTEMPTS": "3",
		"DATABASE_URL":        "postgres://localhost/accounts",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := outbox.RelayConfig{Interval: 250 * time.Millisecond, Lease: 5 * time.Minute, Timeout: 10 * time.Second, Batch: 500, MaxAttempts: 3}
	if c.Outbox != want || c.DatabaseURL != "postgres://localhost/accounts" {
		t.Errorf("got %+v", c)
	}
}

func testLoadRejectsValuesThatCannotWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{"OUTBOX_LEASE": "10s", "OUTBOX_TIMEOUT": "30s"}, "OUTBOX_LEASE"},
		{map[string]string{"OUTBOX_LEASE": "30s"}, "OUTBOX_LEASE"},
		{map[string]string{"OUTBOX_BATCH": "0"}, "OUTBOX_BATCH"},
		{map[string]string{"OUTBOX_BATCH": "-5"}, "OUTBOX_BATCH"},
		{map[string]string{"OUTBOX_MAX_ATTEMPTS": "0"}, "OUTBOX_MAX_ATTEMPTS"},
		{map[string]string{"OUTBOX_INTERVAL": "-1s"}, "OUTBOX_INTERVAL"},
		{map[string]string{"OUTBOX_BATCH": "ten"}, "OUTBOX_BATCH"},
		{map[string]string{"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{map[string]string{"HTTP_TRUSTED_PROXIES": "10.0.0.0/8,proxy.internal"}, "HTTP_TRUSTED_PROXIES"},
		{map[string]string{"BROKER_URL": "amqp://localhost:5672"}, "BROKER_URL"},
		{map[string]string{"BROKER_URL": "nats://localhost"}, "BROKER_URL"},
		{map[string]string{"BROKER_URL": "kafka://a:9092,b"}, "BROKER_URL"},
		{map[string]string{"BROKER_URL": "nats://localhost:4222/path"}, "BROKER_URL"},
		{map[string]string{"BROKER_URL": "kafka://user:pw@a:9092"}, "BROKER_URL"},
		{map[string]string{"BROKER_URL": "nats://localhost:4222", "BROKER_SUBJECT_PREFIX": "accounts"}, "BROKER_SUBJECT_PREFIX"},
		{map[string]string{"BROKER_URL": "nats://localhost:4222", "BROKER_SUBJECT_PREFIX": "acc.>."}, "BROKER_SUBJECT_PREFIX"},
		{map[string]string{"WEBHOOK_URL": "https://hooks.example.com/in"}, "WEBHOOK_SECRET"},
		{map[string]string{"PUBLISH_RETRY_FOR": "10m"}, "PUBLISH_RETRY_FOR"},
		{map[string]string{"ADMIN_PPROF": "true"}, "ADMIN_ADDR"},
		{map[string]string{"ADMIN_ADDR": "8081"}, "ADMIN_ADDR"},
		{map[string]string{"ADMIN_ADDR": ":8080", "HTTP_ADDR": ":8080"}, "ADMIN_ADDR"},
		{map[string]string{"ADMIN_ADDR": ":metrics"}, "ADMIN_ADDR"},
		{map[string]string{"HTTP_ADDR": "8080"}, "HTTP_ADDR"},
		{map[string]string{"HTTP_ADDR": "localhost"}, "HTTP_ADDR"},
		{map[string]string{"HTTP_ADDR": ":http"}, "HTTP_ADDR"},
		{map[string]string{"HTTP_ADDR": "127.0.0.1:70000"}, "HTTP_ADDR"},
		{map[string]string{"SHUTDOWN_GRACE": "-1s"}, "SHUTDOWN_GRACE"},
		{map[string]string{"SHUTDOWN_DELAY": "-1s"}, "SHUTDOWN_DELAY"},
		{map[string]string{"SHUTDOWN_GRACE": "10s", "SHUTDOWN_DELAY": "10s"}, "SHUTDOWN_DELAY"},
		{map[string]string{"WEBHOOK_URL": "ftp://hooks.example.com", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "WEBHOOK_URL"},
		{map[string]string{"WEBHOOK_URL": "https://hooks.example.com", "WEBHOOK_SECRET": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "WEBHOOK_SECRET"},
		{map[string]string{"WEBHOOK_URL": "https://hooks.example.com", "WEBHOOK_SECRET": "whsec_c2hvcnQ="}, "WEBHOOK_SECRET"},
		// Links are BASE_URL/sign-in?code=...: a query or a fragment in
		// BASE_URL would swallow the path and the code.
		{map[string]string{"BASE_URL": "https://accounts.example.com/?q=1"}, "BASE_URL"},
		{map[string]string{"BASE_URL": "https://accounts.example.com/#f"}, "BASE_URL"},
		{map[string]string{"MAIL_FROM": "notanaddress"}, "MAIL_FROM"},
		{map[string]string{"MAIL_FROM": "accounts@example.com\r\nBcc: x@example.com"}, "MAIL_FROM"},
		{map[string]string{"MAIL_DOMAIN": "a b>c"}, "MAIL_DOMAIN"},
		{map[string]string{"MAIL_DOMAIN": "mail@example.com"}, "MAIL_DOMAIN"},
		{map[string]string{"SMTP_TIMEOUT": "0s"}, "SMTP_TIMEOUT"},
		{map[string]string{"SMTP_TIMEOUT": "-1s"}, "SMTP_TIMEOUT"},
		{map[string]string{"MAIL_BUDGET": "0"}, "MAIL_BUDGET"},
		{map[string]string{"MAIL_BUDGET_WINDOW": "-1h"}, "MAIL_BUDGET_WINDOW"},
		{map[string]string{"INVITATION_LIMIT": "-1"}, "INVITATION_LIMIT"},
		{map[string]string{"INVITATION_ACCOUNT_LIMIT": "-1"}, "INVITATION_ACCOUNT_LIMIT"},
		{map[string]string{"INVITATION_WINDOW": "-1h"}, "INVITATION_WINDOW"},
		{map[string]string{"INVITATION_TTL": "-1s"}, "INVITATION_TTL"},
		{map[string]string{"INVITATION_TTL": "1s"}, "INVITATION_TTL"},
		{map[string]string{"INVITATION_WINDOW": "1ns"}, "INVITATION_WINDOW"},
	} {
		_, err := config.Load(getenv(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%v: error %v does not name %s", tc.env, err, tc.name)
		}
	}
}

func testLoadParsesBrokerURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]config.Broker{
		"":                                      {},
		"nats://127.0.0.1:4222":                 {Kind: "nats", Addrs: []string{"nats://127.0.0.1:4222"}},
		"nats://u:p@a:4222,nats://b:4222, c:1":  {Kind: "nats", Addrs: []string{"nats://u:p@a:4222", "nats://b:4222", "nats://c:1"}},
		"kafka://k1:9092,k2:9092":               {Kind: "kafka", Addrs: []string{"k1:9092", "k2:9092"}},
		"kafka://[::1]:9092,kafka://[::1]:9093": {Kind: "kafka", Addrs: []string{"[::1]:9092", "[::1]:9093"}},
	} {
		c, err := config.Load(getenv(map[string]string{"BROKER_URL": raw}))
		if err != nil {
			t.Errorf("%q: %v", raw, err)
			continue
		}
		if got := c.Broker(); got.Kind != want.Kind || strings.Join(got.Addrs, " ") != strings.Join(want.Addrs, " ") {
			t.Errorf("%q: %+v, want %+v", raw, got, want)
		}
	}
}

// A password in a URL is never repeated by the error about it.
func testLoadNeverEchoesAPassword(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"BROKER_URL": "nats://ops:hunter2@[::1"},
		{"BROKER_URL": "nats://ops:hunter2@host"},
		{"BROKER_URL": "kafka://ops:hunter2@host:9092"},
		{"BROKER_URL": "natz://ops:hunter2@host:4222"},
		{"WEBHOOK_URL": "ftp://ops:hunter2@host", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"WEBHOOK_URL": "https://ops:hunter2@host:99999", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"WEBHOOK_URL": "https://ops:hunter2?x@host/in", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"WEBHOOK_URL": "https://ops:hunter2/x@host/in", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"WEBHOOK_URL": "https://ops:99999#2@host/in", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"WEBHOOK_URL": "https://ops:123#hunter2@host/in", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
	} {
		_, err := config.Load(getenv(env))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: error %v, want one without the password", env, err)
		}
	}
}

// Links point at the address the app listens on unless BASE_URL says
// otherwise.
func testBaseURLFollowsHTTPAddrUnlessSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, base, want string }{
		{"", "", "http://127.0.0.1:8080"},
		{":9090", "", "http://127.0.0.1:9090"},
		{"0.0.0.0:9091", "", "http://127.0.0.1:9091"},
		{"[::]:9092", "", "http://127.0.0.1:9092"},
		{"127.0.0.1:7000", "", "http://127.0.0.1:7000"},
		{"[::1]:7001", "", "http://[::1]:7001"},
		{":9090", "https://accounts.example.com/", "https://accounts.example.com"},
	} {
		c, err := config.Load(getenv(map[string]string{"HTTP_ADDR": tc.addr, "BASE_URL": tc.base}))
		if err != nil {
			t.Fatal(err)
		}
		if c.BaseURL != tc.want || c.BaseURLFromAddr != (tc.base == "") {
			t.Errorf("HTTP_ADDR %q, BASE_URL %q: base %q (from addr %v), want %q", tc.addr, tc.base, c.BaseURL, c.BaseURLFromAddr, tc.want)
		}
	}
	// What app config says of the default is what it is.
	c, err := config.Load(getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range config.Describe() {
		if v.Name == "BASE_URL" && (!strings.Contains(v.Description, c.BaseURL+" by default") || strings.Contains(v.Description, "localhost:")) {
			t.Errorf("BASE_URL is described as %q; its default is %s", v.Description, c.BaseURL)
		}
	}
}

func testLoadParsesTrustedProxies(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(map[string]string{"HTTP_TRUSTED_PROXIES": "10.1.2.3/8, 192.0.2.7,2001:db8::/32"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.TrustedProxies); got != "[10.0.0.0/8 192.0.2.7/32 2001:db8::/32]" {
		t.Errorf("trusted proxies %s", got)
	}
}
