package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// tracingWanted reports whether the standard OpenTelemetry environment asks
// for traces: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off. Off
// by default.
func tracingWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: only otlp and none are supported", exp)
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
}

// startTracing makes the OTLP trace exporter the OTEL_* variables describe
// (nil provider when tracing is off). The exporter speaks OTLP over HTTP
// (http/protobuf, the default) or gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc);
// it reads the endpoint, headers, timeout, TLS and
// compression variables itself, and the SDK reads OTEL_TRACES_SAMPLER and
// OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME (default service name
// switchyard).
func startTracing(ctx context.Context) (*sdktrace.TracerProvider, error) {
	on, err := tracingWanted(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: want http/protobuf (the default) or grpc", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("switchyard")), resource.Environment())
	if err != nil {
		res = resource.Environment()
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
