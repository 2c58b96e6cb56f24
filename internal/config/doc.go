// Package config reads the service's configuration from the environment
// through caarlos0/env struct tags, and describes every variable from those
// same tags (`env`, `envDefault`, `desc`) for `app config`.
//
// Configuration reaches the rest of the service as values: nothing below
// cmd/app reads the environment.
package config
