// Package observe turns sessions into Prometheus metrics and OpenTelemetry
// traces.
//
// It hooks into what a session already offers, never into the firing path
// itself: the session's events (session.Config.Observer), a handler
// middleware (one call per handler attempt), and the journal's write hook
// (session.Config.OnJournalWrite). Telemetry.Instrument adds those hooks
// to a session.Config; Telemetry.Track lets a scrape read a running
// session's delivery buffers and budgets.
//
// Metrics are registered on a registry of their own (Telemetry.Registry),
// served by Telemetry.Handler in the Prometheus text format. Traces go to
// the TracerProvider given to New (nil: no tracing, no middleware cost);
// wiring an exporter is the program's business (cmd/switchyard reads the
// standard OTEL_* variables). A node firing is a span; each handler
// attempt is a child span. The parent of a firing span is the trace the
// firing's caller carries (a W3C traceparent in the caller's trace field,
// or in the NATS header traceparent of an outside envelope), so a trace an
// outside publisher started continues through the session.
package observe
