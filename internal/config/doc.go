// Package config reads the service's configuration from the environment
// through caarlos0/env struct tags, and describes every variable from those
// same tags (`env`, `envDefault`, `desc`) for `app config`.
//
// The tags of the domain's settings are here too ([Policy]), so that the
// domain knows no environment; their defaults are not tags but the
// domain's own ([user.Policy.WithDefaults]), written once, which Load
// starts from and `app config` shows.
//
// Configuration reaches the rest of the service as values: nothing below
// cmd/app reads the environment.
package config
