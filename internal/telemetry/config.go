package telemetry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Config holds the OpenTelemetry variables of tracing, as `app config`
// shows them. Only Exporter and the protocols choose what [New] builds;
// the SDK and the exporters read the others from the process's environment
// themselves (see the package's doc).
type Config struct {
	// Exporter turns tracing on: otlp, console, or none (off).
	Exporter string `env:"OTEL_TRACES_EXPORTER" envDefault:"none" desc:"Where spans go: otlp (to OTEL_EXPORTER_OTLP_ENDPOINT), console (JSON on standard error, beside the log) or none; none, the default, turns tracing off at no cost."`
	// Protocol is the OTLP transport of every signal.
	Protocol string `env:"OTEL_EXPORTER_OTLP_PROTOCOL" envDefault:"http/protobuf" desc:"OTLP transport: http/protobuf (port 4318) or grpc (port 4317)."`
	// TracesProtocol is the OTLP transport of spans, over Protocol.
	TracesProtocol string `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" desc:"OTLP transport of spans; unset: OTEL_EXPORTER_OTLP_PROTOCOL."`
	// Endpoint is the collector's base URL.
	Endpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT" desc:"Base URL of the OTLP receiver (spans go to /v1/traces under it over http/protobuf); unset: http://localhost:4318, or localhost:4317 over grpc."`
	// TracesEndpoint is the full URL spans go to, over Endpoint.
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" desc:"Full URL spans are sent to; unset: from OTEL_EXPORTER_OTLP_ENDPOINT."`
	// Headers go with every export, such as a collector's API key.
	Headers string `env:"OTEL_EXPORTER_OTLP_HEADERS" secret:"true" desc:"key=value,... headers sent with every export, such as an API key."`
	// ServiceName is the resource's service.name.
	ServiceName string `env:"OTEL_SERVICE_NAME" envDefault:"accounts" desc:"service.name of every span."`
	// ResourceAttributes are more attributes of the resource.
	ResourceAttributes string `env:"OTEL_RESOURCE_ATTRIBUTES" desc:"key=value,... attributes of the resource, such as deployment.environment.name=prod."`
	// Sampler chooses the traces that are recorded.
	Sampler string `env:"OTEL_TRACES_SAMPLER" envDefault:"parentbased_always_on" desc:"Which traces are kept: always_on, always_off, traceidratio, or parentbased_ and one of them (follow an incoming traceparent's choice; decide alone for a new trace)."`
	// SamplerArg is the ratio of traceidratio.
	SamplerArg string `env:"OTEL_TRACES_SAMPLER_ARG" desc:"The ratio of traceidratio samplers, 0 to 1, such as 0.01; unset: 1."`
	// BSP* tune the batch span processor, in milliseconds and spans.
	BSPScheduleDelay      string `env:"OTEL_BSP_SCHEDULE_DELAY" envDefault:"5000" desc:"Milliseconds between two exports of the spans that ended."`
	BSPExportTimeout      string `env:"OTEL_BSP_EXPORT_TIMEOUT" envDefault:"30000" desc:"Milliseconds an export may take."`
	BSPMaxQueueSize       string `env:"OTEL_BSP_MAX_QUEUE_SIZE" envDefault:"2048" desc:"Spans waiting for export at most; past it new spans are dropped."`
	BSPMaxExportBatchSize string `env:"OTEL_BSP_MAX_EXPORT_BATCH_SIZE" envDefault:"512" desc:"Spans sent in one export at most."`
	// ExemplarFilter chooses the measurements that keep an exemplar while
	// tracing is on; the metrics SDK reads it.
	ExemplarFilter string `env:"OTEL_METRICS_EXEMPLAR_FILTER" envDefault:"trace_based" desc:"Which measurements keep their trace as an exemplar on /metrics (in OpenMetrics) while tracing is on: trace_based (those made in a sampled span), always_on or always_off. With tracing off none does."`
}

// Exporters and protocols that [New] knows.
const (
	ExporterNone    = "none"
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"

	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Enabled reports whether c turns tracing on.
func (c Config) Enabled() bool { return c.Exporter != "" && c.Exporter != ExporterNone }

// protocol returns the OTLP transport of spans.
func (c Config) protocol() string {
	switch {
	case c.TracesProtocol != "":
		return c.TracesProtocol
	case c.Protocol != "":
		return c.Protocol
	}
	return ProtocolHTTP
}

// Validate reports what [New] could not build: an exporter, a protocol or
// a sampler it does not know, a sampler's ratio that is no number from 0
// to 1, or a batch span processor's setting that is no whole number in its
// range; and an exemplar filter that the metrics SDK would ignore. Each
// error names its variable.
func (c Config) Validate() error {
	var errs []error
	switch c.Exporter {
	case "", ExporterNone, ExporterOTLP, ExporterConsole:
	default:
		errs = append(errs, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp, console or none, got %q", c.Exporter))
	}
	for _, p := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", c.Protocol}, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", c.TracesProtocol},
	} {
		if p.value != "" && p.value != ProtocolHTTP && p.value != ProtocolGRPC {
			errs = append(errs, fmt.Errorf("%s must be http/protobuf or grpc, got %q", p.name, p.value))
		}
	}
	sampler := strings.TrimPrefix(c.Sampler, "parentbased_")
	switch sampler {
	case "", "always_on", "always_off", "traceidratio":
	default:
		errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER must be always_on, always_off or traceidratio, alone or after parentbased_, got %q", c.Sampler))
	}
	switch strings.ToLower(strings.TrimSpace(c.ExemplarFilter)) {
	case "", "trace_based", "always_on", "always_off":
	default:
		errs = append(errs, fmt.Errorf("OTEL_METRICS_EXEMPLAR_FILTER must be trace_based, always_on or always_off, got %q", c.ExemplarFilter))
	}
	// The SDK reads these itself, takes a value that is no number for its
	// default, and panics at a negative size.
	for _, v := range []struct {
		name, value string
		least       int
		what        string
	}{
		{"OTEL_BSP_SCHEDULE_DELAY", c.BSPScheduleDelay, 1, "milliseconds, at least 1"},
		{"OTEL_BSP_EXPORT_TIMEOUT", c.BSPExportTimeout, 0, "milliseconds, 0 for no limit"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", c.BSPMaxQueueSize, 1, "spans, at least 1"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", c.BSPMaxExportBatchSize, 1, "spans, at least 1"},
	} {
		if n, err := strconv.Atoi(v.value); v.value != "" && (err != nil || n < v.least) {
			errs = append(errs, fmt.Errorf("%s must be a whole number of %s, got %q", v.name, v.what, v.value))
		}
	}
	if sampler == "traceidratio" && c.SamplerArg != "" {
		if r, err := strconv.ParseFloat(c.SamplerArg, 64); err != nil || r < 0 || r > 1 {
			errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got %q", c.SamplerArg))
		}
	}
	return errors.Join(errs...)
}

// InEffect says in one line what tracing c turns on: "off", or the
// exporter, its transport and destination, and the sampler.
func (c Config) InEffect() string {
	if !c.Enabled() {
		return "off"
	}
	sampler := c.Sampler
	if sampler == "" {
		sampler = "parentbased_always_on"
	}
	if strings.HasSuffix(sampler, "traceidratio") {
		arg := c.SamplerArg
		if arg == "" {
			arg = "1"
		}
		sampler += " " + arg
	}
	dest := "standard error"
	if c.Exporter == ExporterOTLP {
		dest = c.protocol() + " to " + c.endpoint()
	}
	return fmt.Sprintf("%s, %s, sampler %s, service.name %s", c.Exporter, dest, sampler, c.serviceName())
}

// endpoint returns where OTLP spans go, as the exporters work it out.
func (c Config) endpoint() string {
	switch {
	case c.TracesEndpoint != "":
		return c.TracesEndpoint
	case c.Endpoint != "" && c.protocol() == ProtocolHTTP:
		return strings.TrimSuffix(c.Endpoint, "/") + "/v1/traces"
	case c.Endpoint != "":
		return c.Endpoint
	case c.protocol() == ProtocolGRPC:
		return "localhost:4317"
	}
	return "http://localhost:4318/v1/traces"
}

func (c Config) serviceName() string {
	if c.ServiceName == "" {
		return "accounts"
	}
	return c.ServiceName
}
