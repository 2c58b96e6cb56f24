package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/publish/webhook"
	"github.com/eventsourced/accounts/internal/telemetry"
	"github.com/eventsourced/accounts/internal/user"
)

// Config is the whole configuration of the service.
type Config struct {
	// DatabaseURL selects the backend and its database.
	DatabaseURL string `env:"DATABASE_URL" desc:"postgres://... selects PostgreSQL; sqlite:PATH selects SQLite; unset: a SQLite file under ./data/."`
	// DatabasePooler says what stands between the app and PostgreSQL.
	DatabasePooler string `env:"DATABASE_POOLER" envDefault:"none" desc:"What DATABASE_URL reaches on PostgreSQL: none (the server itself), session or transaction (a pooler such as PgBouncer in that pool_mode). Behind a pooler the app sends only the startup parameters a pooler passes on and sets the others itself (search_path from the URL too); in transaction mode it prepares no named statement, keeps no setting or lock past a transaction, and cannot LISTEN (see DATABASE_LISTEN_URL)."`
	// DatabaseListenURL is a direct connection for LISTEN.
	DatabaseListenURL string `env:"DATABASE_LISTEN_URL" desc:"postgres:// URL of the same database, reached without a transaction pooler, on which relays LISTEN for the commits of other instances; unset: they listen through DATABASE_URL, except with DATABASE_POOLER=transaction, where they find other instances' messages only at their next poll (OUTBOX_INTERVAL), logged at start and shown by the outbox_wakeups_listening gauge."`
	// LogFormat is how log lines are written.
	LogFormat string `env:"LOG_FORMAT" envDefault:"text" desc:"How log lines are written: text (key=value) or json (one object a line)."`
	// LogLevel is the least severe level that is logged.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"INFO" desc:"Least severe log level written: DEBUG, INFO, WARN or ERROR."`
	// API serves the HTTP API in this process.
	API bool `env:"API" envDefault:"true" desc:"Serve the HTTP API in this process; false runs only the relay."`
	// Relay runs the outbox relay in this process.
	Relay bool `env:"RELAY" envDefault:"true" desc:"Run the outbox relay in this process; false leaves delivery to other instances."`
	// Projections keeps the asynchronous projections in this process.
	Projections bool `env:"PROJECTIONS" envDefault:"true" desc:"Keep the asynchronous projections (account activity) in this process; false leaves them to other instances."`
	// HTTPAddr is where the API listens.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080" desc:"Listen address of the HTTP API; the default is loopback only, so set :8080 (every interface) or a host's address to serve others."`
	// AdminAddr is where the admin listener listens; empty serves
	// /metrics on HTTPAddr.
	AdminAddr string `env:"ADMIN_ADDR" desc:"Listen address of the admin listener, which serves /metrics, /healthz, /readyz and (ADMIN_PPROF) /debug/pprof/, for operators and the metrics scraper only; once set, the API's listener no longer serves /metrics, and an instance with API=false has probes and metrics too. Recommended: set it (say :8081) and keep the port off the public network; unset: /metrics is served beside the API on HTTP_ADDR, as before."`
	// AdminPprof serves Go's profiler on the admin listener.
	AdminPprof bool `env:"ADMIN_PPROF" envDefault:"false" desc:"Serve Go's profiler (go tool pprof) under /debug/pprof/ on the admin listener; it needs ADMIN_ADDR, and is never served on HTTP_ADDR."`
	// BaseURL is where the links in mails point.
	BaseURL string `env:"BASE_URL" desc:"Where links point: BASE_URL/sign-in?code=... and BASE_URL/confirm-email?code=...; unset: http://HTTP_ADDR, with 127.0.0.1 for a host it leaves out or that means every interface (http://127.0.0.1:8080 by default). The session cookie is set for this host: open the pages at the same one (127.0.0.1 and localhost are two)."`
	// BaseURLFromAddr reports that BASE_URL was unset, so BaseURL points
	// at HTTP_ADDR: a server listening on port 0 sets it once it knows
	// its port.
	BaseURLFromAddr bool
	// HTTPRateLimit is the requests per minute one client address may make.
	HTTPRateLimit int `env:"HTTP_RATE_LIMIT" envDefault:"600" desc:"Requests per minute per client address, to every path but the probes (/healthz, /readyz); 0 turns the limit off."`
	// HTTPTrustedProxies are the proxies whose X-Forwarded-For is believed.
	HTTPTrustedProxies []string `env:"HTTP_TRUSTED_PROXIES" desc:"CIDRs (or addresses) of the proxies in front of the service: from them only, the client that HTTP_RATE_LIMIT counts is the rightmost untrusted hop of X-Forwarded-For; unset: the header is ignored."`
	// TrustedProxies is HTTPTrustedProxies parsed.
	TrustedProxies []netip.Prefix
	// SMTPURL is the mail server; empty writes mail to the log.
	SMTPURL string `env:"SMTP_URL" desc:"smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://...; unset: each mail is printed on the terminal if standard output is one, and otherwise not sent (retried, then buried); never to the log."`
	// SMTPTimeout bounds each exchange with the mail server.
	SMTPTimeout time.Duration `env:"SMTP_TIMEOUT" envDefault:"10s" desc:"Longest wait for the mail server at each step."`
	// MailFrom is the sender address of every mail.
	MailFrom string `env:"MAIL_FROM" desc:"Sender address; unset: accounts@ the host of BASE_URL."`
	// MailDomain is the right-hand side of every Message-ID.
	MailDomain string `env:"MAIL_DOMAIN" desc:"Right-hand side of Message-ID; unset: the host of BASE_URL."`
	// BrokerURL is the broker integration events are republished to.
	BrokerURL string `env:"BROKER_URL" desc:"nats://host:port[,...] (JetStream) or kafka://host:port[,...] to republish integration events to; unset: none."`
	// BrokerSubjectPrefix begins every subject or topic of the broker.
	BrokerSubjectPrefix string `env:"BROKER_SUBJECT_PREFIX" envDefault:"accounts." desc:"Begins each NATS subject (PREFIXuser.registered, in the stream named after it, ACCOUNTS) and Kafka topic (PREFIXuser)."`
	// WebhookURL is the endpoint integration events are posted to.
	WebhookURL string `env:"WEBHOOK_URL" desc:"http(s) endpoint to POST each integration event to, signed to the Standard Webhooks spec; unset: none."`
	// WebhookSecret signs every post to WebhookURL.
	WebhookSecret string `env:"WEBHOOK_SECRET" secret:"true" desc:"The webhook's signing secret: whsec_ and the base64 of 24 to 64 random bytes. Required with WEBHOOK_URL."`
	// PublishRetryFor is how long an integration event is retried.
	PublishRetryFor time.Duration `env:"PUBLISH_RETRY_FOR" envDefault:"72h" desc:"How long an integration event that cannot be published is retried, at most every 5 minutes, before it is buried."`
	// DataKey holds the master keys that wrap each person's data key.
	DataKey string `env:"DATA_KEY" secret:"true" desc:"Master keys that wrap each person's data key: ID:KEY[,ID:KEY...], KEY the base64 of 32 random bytes (app keys new makes one); the first wraps new keys, the others only unwrap until app keys rotate has rewrapped them. Unset on SQLite: a key file beside the database."`
	// SweepInterval is how often the app sweeps what has expired.
	SweepInterval time.Duration `env:"SWEEP_INTERVAL" envDefault:"5m" desc:"How often each instance deletes the rows of expired links and sessions, and buried messages past OUTBOX_BURIED_RETENTION; 0 turns the sweeps off."`
	// BuriedRetention is how long a buried message is kept.
	BuriedRetention time.Duration `env:"OUTBOX_BURIED_RETENTION" envDefault:"168h" desc:"How long a buried message is kept for an operator to look at or requeue before the sweep deletes it; 0 keeps buried messages until discarded by hand."`
	// ShutdownGrace bounds a stop, from SIGTERM to the exit.
	ShutdownGrace time.Duration `env:"SHUTDOWN_GRACE" envDefault:"25s" desc:"Longest a stop may take, from SIGTERM or SIGINT to the exit: requests in flight finish, deliveries in flight finish or are released (due again at once, no attempt spent), the projections' batches commit or roll back; keep it below the orchestrator's kill timeout (Kubernetes: 30s)."`
	// ShutdownDelay is how long a stopping API goes on serving while
	// /readyz answers 503.
	ShutdownDelay time.Duration `env:"SHUTDOWN_DELAY" envDefault:"0s" desc:"How long, once stopping, the API goes on serving while /readyz answers 503, so that a load balancer stops sending before the listener closes; part of SHUTDOWN_GRACE."`
	// Policy holds the limits of sign-in links, sessions and mail.
	Policy Policy
	// OrgPolicy holds the limits of invitations into organizations.
	OrgPolicy OrgPolicy
	// Outbox tunes the relay.
	Outbox outbox.RelayConfig `envPrefix:"OUTBOX_"`
	// Tracing holds the OpenTelemetry variables of tracing, off unless
	// OTEL_TRACES_EXPORTER is set.
	Tracing telemetry.Config
}

// Load reads the configuration through getenv, such as os.Getenv, and
// checks it. An empty value counts as unset. The error names every variable
// that is wrong.
func Load(getenv func(string) string) (Config, error) {
	environ := map[string]string{}
	for _, v := range Describe() {
		if val := getenv(v.Name); val != "" {
			environ[v.Name] = val
		}
	}
	c := defaults()
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		return Config{}, fmt.Errorf("config: %w", nameVariables(err))
	}
	if _, err := checkAddr("HTTP_ADDR", c.HTTPAddr); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if c.BaseURL == "" {
		c.BaseURL, c.BaseURLFromAddr = BaseURLOf(c.HTTPAddr), true
	}
	base, err := url.Parse(c.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return Config{}, fmt.Errorf("config: BASE_URL must be an http(s) URL, got %q", c.BaseURL)
	}
	if base.RawQuery != "" || base.ForceQuery || base.Fragment != "" || strings.Contains(c.BaseURL, "#") {
		return Config{}, fmt.Errorf("config: BASE_URL must have no query or fragment, since links add a path and ?code= to it; got %q", c.BaseURL)
	}
	c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
	if err := c.checkMail(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if c.MailDomain == "" {
		c.MailDomain = base.Hostname()
	}
	if c.MailFrom == "" {
		c.MailFrom = "accounts@" + base.Hostname()
	}
	for _, p := range c.HTTPTrustedProxies {
		p = strings.TrimSpace(p)
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return Config{}, fmt.Errorf("config: HTTP_TRUSTED_PROXIES: %q is neither a CIDR nor an address", p)
			}
			prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		c.TrustedProxies = append(c.TrustedProxies, prefix.Masked())
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return Config{}, fmt.Errorf("config: LOG_FORMAT must be text or json, got %q", c.LogFormat)
	}
	if _, err := postgres.ParsePooler(c.DatabasePooler); err != nil {
		return Config{}, fmt.Errorf("config: DATABASE_POOLER must be none, session or transaction, got %q", c.DatabasePooler)
	}
	if c.DatabaseListenURL != "" && !strings.HasPrefix(c.DatabaseListenURL, "postgres://") && !strings.HasPrefix(c.DatabaseListenURL, "postgresql://") {
		return Config{}, fmt.Errorf("config: DATABASE_LISTEN_URL must be a postgres:// URL, got %s", strconv.Quote(mustRedact(c.DatabaseListenURL)))
	}
	if err := c.checkAdmin(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if c.HTTPRateLimit < 0 {
		return Config{}, fmt.Errorf("config: HTTP_RATE_LIMIT must be 0 or more, got %d", c.HTTPRateLimit)
	}
	if err := errors.Join(c.Outbox.Validate(), user.Policy(c.Policy).Validate(), org.Policy(c.OrgPolicy).Validate(), c.checkIntegration(), c.checkShutdown(), c.Tracing.Validate()); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// checkIntegration reports what is wrong with the destinations of
// integration events.
func (c Config) checkIntegration() error {
	var errs []error
	if b, err := parseBroker(c.BrokerURL); err != nil {
		errs = append(errs, err)
	} else if b.Kind != "" {
		errs = append(errs, checkSubjectPrefix(c.BrokerSubjectPrefix))
	}
	switch {
	case (c.WebhookURL == "") != (c.WebhookSecret == ""):
		errs = append(errs, errors.New("WEBHOOK_URL and WEBHOOK_SECRET go together: set both or neither"))
	case c.WebhookURL != "":
		err := webhook.Config{URL: c.WebhookURL, Secret: c.WebhookSecret}.Validate()
		if errors.Is(err, webhook.ErrBadURL) {
			errs = append(errs, fmt.Errorf("WEBHOOK_URL: %w", err))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOK_SECRET: %w", err))
		}
	}
	if c.DataKey != "" {
		if _, err := keyring.ParseMasters(c.DataKey); err != nil {
			errs = append(errs, fmt.Errorf("DATA_KEY: %w", err))
		}
	}
	if c.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("SWEEP_INTERVAL must be 0 (off) or more, got %s", c.SweepInterval))
	}
	if c.BuriedRetention < 0 {
		errs = append(errs, fmt.Errorf("OUTBOX_BURIED_RETENTION must be 0 (keep) or more, got %s", c.BuriedRetention))
	}
	if c.PublishRetryFor < time.Hour {
		errs = append(errs, fmt.Errorf("PUBLISH_RETRY_FOR must be at least 1h, or a short outage of a destination buries its events; got %s", c.PublishRetryFor))
	}
	return errors.Join(errs...)
}

// mailDomain is what MAIL_DOMAIN may be: a host name, the right-hand side
// of a Message-ID.
var mailDomain = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

// checkMail reports what is wrong with the settings of the mail, as set;
// those derived from BASE_URL are not checked.
func (c Config) checkMail() error {
	var errs []error
	if c.MailFrom != "" {
		if _, err := netmail.ParseAddress(c.MailFrom); err != nil || strings.ContainsAny(c.MailFrom, "\r\n") {
			errs = append(errs, fmt.Errorf("MAIL_FROM must be one email address, such as accounts@example.com or \"Accounts <accounts@example.com>\"; got %q", c.MailFrom))
		}
	}
	if c.MailDomain != "" && !mailDomain.MatchString(c.MailDomain) {
		errs = append(errs, fmt.Errorf("MAIL_DOMAIN must be a host name, such as example.com; got %q", c.MailDomain))
	}
	if c.SMTPTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SMTP_TIMEOUT must be positive, got %s", c.SMTPTimeout))
	}
	return errors.Join(errs...)
}

// checkAdmin reports what is wrong with the admin listener.
func (c Config) checkAdmin() error {
	if c.AdminAddr == "" {
		if c.AdminPprof {
			return errors.New("ADMIN_PPROF=true needs ADMIN_ADDR: the profiler is served on the admin listener only")
		}
		return nil
	}
	port, err := checkAddr("ADMIN_ADDR", c.AdminAddr)
	if err != nil {
		return err
	}
	if c.AdminAddr == c.HTTPAddr && port != 0 {
		return fmt.Errorf("ADMIN_ADDR must differ from HTTP_ADDR (%s): the admin listener is a listener of its own", c.HTTPAddr)
	}
	return nil
}

// checkAddr returns the port of addr, the value of the listen address
// name, or an error that names it unless addr is host:port or :port with
// a port number.
func checkAddr(name, addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	port, perr := strconv.ParseUint(p, 10, 16)
	if err != nil || perr != nil {
		return 0, fmt.Errorf("%s must be host:port or :port, such as 127.0.0.1:8080 or :8080; got %q", name, addr)
	}
	return int(port), nil
}

// mustRedact is [RedactURL] without its second result.
func mustRedact(raw string) string {
	shown, _ := RedactURL(raw)
	return shown
}

// checkShutdown reports what is wrong with the bounds of a stop.
func (c Config) checkShutdown() error {
	var errs []error
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_GRACE must be positive, got %s", c.ShutdownGrace))
	}
	if c.ShutdownDelay < 0 || (c.ShutdownGrace > 0 && c.ShutdownDelay >= c.ShutdownGrace) {
		errs = append(errs, fmt.Errorf("SHUTDOWN_DELAY must be 0 or more and less than SHUTDOWN_GRACE (%s), got %s", c.ShutdownGrace, c.ShutdownDelay))
	}
	return errors.Join(errs...)
}

// BaseURLOf returns the base URL of links to a server listening on addr,
// such as "127.0.0.1:8080" or ":9000": http, at 127.0.0.1 when addr names
// no host or every interface. It is one host, not localhost as well,
// since a browser keeps the session cookie for the host it was set by.
func BaseURLOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://127.0.0.1:8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// nameVariables rewrites the parse errors of caarlos0/env, which name the
// struct field, so that they name the variable a person has to fix.
func nameVariables(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	byField := map[string]string{}
	for _, v := range Describe() {
		byField[v.field] = v.Name
	}
	errs := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) && byField[pe.Name] != "" {
			e = fmt.Errorf("%s: cannot parse as %s: %w", byField[pe.Name], pe.Type, pe.Err)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// Var describes one environment variable.
type Var struct {
	Name        string
	Default     string
	Description string
	// Secret marks a value that is never shown, such as a signing key.
	Secret bool
	field  string
}

// Shown returns value as it may be shown: masked when v is a secret, and
// with any password of a URL masked.
func (v Var) Shown(value string) string {
	if value == "" {
		return ""
	}
	if v.Secret {
		return "********"
	}
	if shown, parsed := RedactURL(value); parsed || strings.Contains(value, "@") {
		return shown
	}
	return value
}

// RedactURL returns raw with the password of a URL masked, and whether raw
// parses as a URL; one that does not is shown by its scheme alone, since
// the parser's error, like the text itself, may repeat the password.
func RedactURL(raw string) (shown string, parsed bool) {
	u, err := url.Parse(raw)
	if err != nil {
		scheme, _, _ := strings.Cut(raw, ":")
		return fmt.Sprintf("(a %q URL that does not parse, not shown: it may hold a password)", scheme), false
	}
	return u.Redacted(), true
}

// Describe lists every variable of [Config] in field order.
func Describe() []Var {
	return describe(reflect.ValueOf(defaults()), "")
}

// defaults returns the Config that [Load] parses the environment into: the
// defaults that are not envDefault tags, since they are written where
// they mean something (the domains' limits, [user.Policy.WithDefaults]
// and [org.Policy.WithDefaults]). A variable the environment leaves unset
// keeps its value here.
func defaults() Config {
	return Config{Policy: Policy(user.Policy{}.WithDefaults()), OrgPolicy: OrgPolicy(org.Policy{}.WithDefaults())}
}

// describe lists the variables of the struct v, whose values are the
// defaults of the fields that have no envDefault tag.
func describe(v reflect.Value, prefix string) []Var {
	var vars []Var
	for f := range v.Type().Fields() {
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			vars = append(vars, describe(v.FieldByIndex(f.Index), prefix+f.Tag.Get("envPrefix"))...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			continue
		}
		def, tagged := f.Tag.Lookup("envDefault")
		if value := v.FieldByIndex(f.Index); !tagged && !value.IsZero() {
			def = showDefault(value)
		}
		vars = append(vars, Var{
			Name:        prefix + name,
			Default:     def,
			Description: f.Tag.Get("desc"),
			Secret:      f.Tag.Get("secret") == "true",
			field:       f.Name,
		})
	}
	return vars
}

// showDefault returns a default as a person would set it: a duration
// without its zero minutes and seconds ("15m", "720h", not "720h0m0s").
func showDefault(v reflect.Value) string {
	d, ok := v.Interface().(time.Duration)
	if !ok {
		return fmt.Sprint(v.Interface())
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
