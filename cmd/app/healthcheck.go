package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/eventsourced/accounts/internal/config"
)

// healthcheck is `app healthcheck`: it asks /readyz of the instance that
// the configuration describes, on this machine, and fails unless it
// answers 200, so that a container's health check needs neither a shell
// nor curl, which the image lacks. It asks the admin listener when
// ADMIN_ADDR is set, which every instance has, and otherwise the API's
// listener, HTTP_ADDR.
func healthcheck(ctx context.Context, getenv func(string) string, timeout time.Duration, stdout io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	addr := cfg.AdminAddr
	if addr == "" {
		if !cfg.API {
			return errors.New("healthcheck: with API=false only the admin listener serves /readyz: set ADMIN_ADDR")
		}
		addr = cfg.HTTPAddr
	}
	url := config.BaseURLOf(addr) + "/readyz"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// The instance is on this machine: never through a proxy of the
	// environment.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = fmt.Fprintf(stdout, "GET %s: %s\n", url, resp.Status)
	return err
}
