package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/eventsourced/accounts/internal/config"
)

// composeService is what the test reads of a service of the compose file.
type composeService struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	Command     []string       `yaml:"command"`
	Environment map[string]any `yaml:"environment"`
	Ports       []string       `yaml:"ports"`
	Volumes     []string       `yaml:"volumes"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// readCompose reads the services of deploy/compose.yaml. Compose fills
// ${VAR:-default} in from the environment; here, with the default.
func readCompose(t *testing.T) map[string]composeService {
	t.Helper()
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]composeService `yaml:"services"`
	}
	b = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`).ReplaceAll(b, []byte("$1"))
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	return f.Services
}

// No engine runs the compose file here, so this reads it: PostgreSQL,
// NATS with JetStream, a mail catcher and two instances of the app, one of
// them relay-only; each app service sets only variables that app config
// knows, points at services the file has, and the one with the API
// listens on every interface and is published; each serves its metrics on
// an admin listener.
func TestComposeFileDescribesTheWholeSystem(t *testing.T) {
	t.Parallel()
	services := readCompose(t)
	known := map[string]bool{}
	for _, v := range config.Describe() {
		known[v.Name] = true
	}
	has := func(prefix string) bool {
		for _, s := range services {
			if strings.HasPrefix(s.Image, prefix) {
				return true
			}
		}
		return false
	}
	for _, image := range []string{"postgres:", "nats:", "axllent/mailpit:"} {
		if !has(image) {
			t.Errorf("no service runs %s", image)
		}
	}
	for name, s := range services {
		if strings.HasPrefix(s.Image, "nats:") && !slices.Contains(s.Command, "--jetstream") {
			t.Errorf("%s runs NATS without --jetstream: %v", name, s.Command)
		}
	}
	var instances, relayOnly, published int
	for name, s := range services {
		if s.Build == nil {
			continue
		}
		for k, v := range s.Environment {
			if !known[k] {
				t.Errorf("service %s sets %s, which app config does not know", name, k)
			}
			for _, ref := range []string{"DATABASE_URL", "SMTP_URL", "BROKER_URL"} {
				if k != ref {
					continue
				}
				u, err := url.Parse(v.(string))
				if err != nil {
					t.Errorf("service %s: %s %q: %v", name, k, v, err)
				} else if _, ok := services[u.Hostname()]; !ok {
					t.Errorf("service %s: %s points at %q, which is no service of the file", name, k, u.Hostname())
				}
			}
		}
		if _, err := config.Load(func(k string) string { s, _ := s.Environment[k].(string); return s }); err != nil {
			t.Errorf("service %s: its environment does not load: %v", name, err)
		}
		if slices.Equal(s.Command, []string{"migrate"}) {
			continue
		}
		instances++
		if a, _ := s.Environment["ADMIN_ADDR"].(string); a == "" {
			t.Errorf("service %s sets no ADMIN_ADDR: its metrics would be served on the public port, or (API=false) not at all", name)
		}
		if s.Environment["API"] == "false" {
			relayOnly++
			continue
		}
		if len(s.Ports) == 0 || s.Environment["HTTP_ADDR"] != ":8080" {
			t.Errorf("service %s serves the API but is not published on :8080 (ports %v, HTTP_ADDR %v)", name, s.Ports, s.Environment["HTTP_ADDR"])
		}
		published++
	}
	if instances != 2 || relayOnly != 1 || published != 1 {
		t.Errorf("%d instances of the app, %d relay-only, %d with the API; want 2, 1 and 1", instances, relayOnly, published)
	}
}

// Prometheus in the compose file scrapes every instance of the app on its
// admin port, and Grafana reads that Prometheus and the shipped dashboard:
// each file a service mounts is in the repository, and each address
// names a service of the file.
func TestComposeFileScrapesAndShowsTheMetrics(t *testing.T) {
	t.Parallel()
	services := readCompose(t)
	for name, s := range services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") {
				continue // A named volume.
			}
			if _, err := os.Stat(filepath.Join("../../deploy", src)); err != nil {
				t.Errorf("service %s mounts %s: %v", name, src, err)
			}
		}
	}
	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "../../deploy/prometheus/prometheus.yml", &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for name, s := range services {
		if s.Build == nil || slices.Equal(s.Command, []string{"migrate"}) {
			continue
		}
		admin, _ := s.Environment["ADMIN_ADDR"].(string)
		_, port, _ := strings.Cut(admin, ":")
		if want := name + ":" + port; !slices.Contains(targets, want) {
			t.Errorf("Prometheus scrapes %v, not %s, the admin listener of service %s", targets, want, name)
		}
	}
	var grafana struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "../../deploy/grafana/provisioning/datasources/prometheus.yaml", &grafana)
	if len(grafana.Datasources) != 1 || grafana.Datasources[0].Type != "prometheus" {
		t.Fatalf("Grafana's data sources: %+v, want one of type prometheus", grafana.Datasources)
	}
	u, err := url.Parse(grafana.Datasources[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := services[u.Hostname()]; !ok || !strings.HasPrefix(s.Image, "prom/prometheus:") {
		t.Errorf("Grafana's data source points at %q, which is no Prometheus service of the compose file", u.Hostname())
	}
}

// Every port of the compose file is published on loopback only: Mailpit's
// UI, which shows every sign-in link, NATS's monitoring port, and the
// app's. Each instance of the app is checked by app healthcheck, which the
// image runs without a shell; the one-off migration is not.
func TestComposeFilePublishesOnLoopbackAndChecksHealth(t *testing.T) {
	t.Parallel()
	services := readCompose(t)
	published := map[string][]string{}
	for name, s := range services {
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("service %s publishes %q, want 127.0.0.1:HOST_PORT:PORT", name, p)
				continue
			}
			published[name] = append(published[name], parts[2])
		}
	}
	for name, s := range services {
		switch {
		case strings.HasPrefix(s.Image, "axllent/mailpit:"):
			if !slices.Contains(published[name], "8025") {
				t.Errorf("service %s does not publish Mailpit's UI (8025) on loopback: %v", name, s.Ports)
			}
		case strings.HasPrefix(s.Image, "nats:"):
			i := slices.Index(s.Command, "--http_port")
			if i < 0 || i+1 == len(s.Command) || !slices.Contains(published[name], s.Command[i+1]) {
				t.Errorf("service %s does not publish NATS's monitoring port (--http_port) on loopback: %v, %v", name, s.Command, s.Ports)
			}
		}
	}
	for name, s := range services {
		if s.Build == nil {
			continue
		}
		if slices.Equal(s.Command, []string{"migrate"}) {
			if s.Healthcheck != nil && len(s.Healthcheck.Test) > 0 {
				t.Errorf("service %s, a one-off migration, has a health check: %v", name, s.Healthcheck.Test)
			}
			continue
		}
		if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/app", "healthcheck"}) {
			t.Errorf("service %s: health check %+v, want [CMD /app healthcheck]", name, s.Healthcheck)
		}
	}
	if _, err := runApp(t, t.Context(), nil, "healthcheck", "--help"); err != nil {
		t.Errorf("app healthcheck --help: %v", err)
	}
}

// readYAML decodes the YAML file at path into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
