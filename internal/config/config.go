// Package config reads the service's configuration from the environment
// through caarlos0/env struct tags, and describes every variable from those
// same tags (`env`, `envDefault`, `desc`) for `app config`.
//
// Configuration reaches the rest of the service as values: nothing below
// cmd/app reads the environment.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"

	"github.com/eventsourced/accounts/internal/outbox"
)

// Config is the whole configuration of the service.
type Config struct {
	// DatabaseURL selects the backend and its database.
	DatabaseURL string `env:"DATABASE_URL" desc:"postgres://... selects PostgreSQL; sqlite:PATH selects SQLite; unset: a SQLite file under ./data/."`
	// LogLevel is the least severe level that is logged.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"INFO" desc:"Least severe log level written: DEBUG, INFO, WARN or ERROR."`
	// Relay runs the outbox relay in this process.
	Relay bool `env:"RELAY" envDefault:"true" desc:"Run the outbox relay in this process; false leaves delivery to other instances."`
	// Outbox tunes the relay.
	Outbox outbox.RelayConfig `envPrefix:"OUTBOX_"`
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
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		return Config{}, fmt.Errorf("config: %w", nameVariables(err))
	}
	if err := c.Outbox.Validate(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
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
	field       string
}

// Describe lists every variable of [Config] in field order.
func Describe() []Var {
	return describe(reflect.TypeFor[Config](), "")
}

func describe(t reflect.Type, prefix string) []Var {
	var vars []Var
	for f := range t.Fields() {
		if p, ok := f.Tag.Lookup("envPrefix"); ok && f.Type.Kind() == reflect.Struct {
			vars = append(vars, describe(f.Type, prefix+p)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			continue
		}
		vars = append(vars, Var{
			Name:        prefix + name,
			Default:     f.Tag.Get("envDefault"),
			Description: f.Tag.Get("desc"),
			field:       f.Name,
		})
	}
	return vars
}
