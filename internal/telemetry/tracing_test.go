package telemetry_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/telemetry"
)

func TestNew(t *testing.T) {
	t.Parallel()
	t.Run("OffByDefault", func(t *testing.T) {
		t.Parallel()
		for _, exporter := range []string{"", "none"} {
			tr, err := telemetry.New(t.Context(), telemetry.Config{Exporter: exporter}, telemetry.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, span := tr.TracerProvider().Tracer("test").Start(t.Context(), "x")
			if tr.Enabled() || span.IsRecording() {
				t.Errorf("exporter %q: enabled %v, span recording %v; want tracing off", exporter, tr.Enabled(), span.IsRecording())
			}
			span.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Error(err)
			}
		}
	})
	// The console exporter writes each span when the provider is shut
	// down, under the service name of the resource.
	t.Run("ConsoleWritesSpansOnShutdown", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		tr, err := telemetry.New(t.Context(), telemetry.Config{Exporter: "console"}, telemetry.Options{Console: &out, Version: "v9"})
		if err != nil {
			t.Fatal(err)
		}
		_, span := tr.TracerProvider().Tracer("test").Start(t.Context(), "the-span")
		span.End()
		if out.Len() != 0 {
			t.Errorf("a span was written before the batch was due: %s", out.String())
		}
		if err := tr.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"Name":"the-span"`, `"Value":"accounts"`, `"Value":"v9"`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("console output lacks %s:\n%s", want, out.String())
			}
		}
	})
	t.Run("RefusesWhatItCannotBuild", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			cfg  telemetry.Config
			name string
		}{
			{telemetry.Config{Exporter: "jaeger"}, "OTEL_TRACES_EXPORTER"},
			{telemetry.Config{Exporter: "otlp", Protocol: "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
			{telemetry.Config{Exporter: "otlp", TracesProtocol: "udp"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
			{telemetry.Config{Sampler: "sometimes"}, "OTEL_TRACES_SAMPLER"},
			{telemetry.Config{Sampler: "parentbased_traceidratio", SamplerArg: "2"}, "OTEL_TRACES_SAMPLER_ARG"},
			{telemetry.Config{ExemplarFilter: "sampled"}, "OTEL_METRICS_EXEMPLAR_FILTER"},
			{telemetry.Config{Exporter: "console", BSPMaxQueueSize: "-1"}, "OTEL_BSP_MAX_QUEUE_SIZE"},
			{telemetry.Config{Exporter: "console", BSPMaxExportBatchSize: "0"}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"},
			{telemetry.Config{Exporter: "console", BSPScheduleDelay: "0"}, "OTEL_BSP_SCHEDULE_DELAY"},
			{telemetry.Config{Exporter: "console", BSPExportTimeout: "5s"}, "OTEL_BSP_EXPORT_TIMEOUT"},
		} {
			_, err := telemetry.New(t.Context(), c.cfg, telemetry.Options{})
			if err == nil || !strings.Contains(err.Error(), c.name) {
				t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.name)
			}
		}
	})
}

func TestConfigInEffect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  telemetry.Config
		want string
	}{
		{telemetry.Config{Exporter: "none"}, "off"},
		{telemetry.Config{Exporter: "otlp", Endpoint: "http://collector:4318/"},
			"otlp, http/protobuf to http://collector:4318/v1/traces, sampler parentbased_always_on, service.name accounts"},
		{telemetry.Config{Exporter: "otlp", Protocol: "grpc", Sampler: "parentbased_traceidratio", SamplerArg: "0.01", ServiceName: "x"},
			"otlp, grpc to localhost:4317, sampler parentbased_traceidratio 0.01, service.name x"},
		{telemetry.Config{Exporter: "otlp", Protocol: "grpc", TracesProtocol: "http/protobuf", TracesEndpoint: "https://c/traces"},
			"otlp, http/protobuf to https://c/traces, sampler parentbased_always_on, service.name accounts"},
	} {
		if got := c.cfg.InEffect(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cfg, got, c.want)
		}
	}
}
