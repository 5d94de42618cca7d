package actors

import (
	"sort"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// NATS headers that carry an envelope's caller (Envelope.caller) on the
// wire, so that any NATS client can set or read them without decoding the
// envelope. Headers win over the envelope's field.
const (
	HeaderTenant    = "Sy-Tenant"
	HeaderUser      = "Sy-User"
	HeaderTrace     = "Sy-Trace"
	HeaderCtxPrefix = "Sy-Ctx-" // followed by a custom key
	// HeaderTraceParent is the W3C trace context header. An outside
	// publisher's OpenTelemetry propagator sets it; it becomes the
	// caller's trace when Sy-Trace is absent, and a trace that is a W3C
	// traceparent is also written to it, so spans continue through the
	// session (docs/observability.md).
	HeaderTraceParent = "traceparent"
)

// CallerKV is c as the envelope's caller field: keys tenant, user, trace
// and the custom keys prefixed "ctx.", sorted.
func CallerKV(c nodes.Caller) []*pb.KV {
	if c.IsZero() {
		return nil
	}
	var out []*pb.KV
	for _, kv := range [][2]string{{"tenant", c.Tenant}, {"trace", c.Trace}, {"user", c.User}} {
		if kv[1] != "" {
			out = append(out, &pb.KV{Key: kv[0], Value: kv[1]})
		}
	}
	keys := make([]string, 0, len(c.Values))
	for k := range c.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, &pb.KV{Key: "ctx." + k, Value: c.Values[k]})
	}
	return out
}

// CallerOf reads an envelope's caller field.
func CallerOf(kvs []*pb.KV) nodes.Caller {
	var c nodes.Caller
	for _, kv := range kvs {
		switch k := kv.GetKey(); {
		case k == "tenant":
			c.Tenant = kv.GetValue()
		case k == "user":
			c.User = kv.GetValue()
		case k == "trace":
			c.Trace = kv.GetValue()
		case strings.HasPrefix(k, "ctx."):
			if c.Values == nil {
				c.Values = map[string]string{}
			}
			c.Values[k[4:]] = kv.GetValue()
		}
	}
	return c
}

// callerHeaders writes a caller field into NATS headers.
func callerHeaders(h nats.Header, kvs []*pb.KV) {
	for _, kv := range kvs {
		switch k := kv.GetKey(); {
		case k == "tenant":
			h.Set(HeaderTenant, kv.GetValue())
		case k == "user":
			h.Set(HeaderUser, kv.GetValue())
		case k == "trace":
			h.Set(HeaderTrace, kv.GetValue())
			if isTraceParent(kv.GetValue()) {
				h[HeaderTraceParent] = []string{kv.GetValue()}
			}
		case strings.HasPrefix(k, "ctx."):
			h.Set(HeaderCtxPrefix+k[4:], kv.GetValue())
		}
	}
}

// callerFromHeaders reads the caller NATS headers carry (nil when none).
// Header names are matched without regard to case; custom keys keep the
// case they were sent with.
func callerFromHeaders(h nats.Header) []*pb.KV {
	if len(h) == 0 {
		return nil
	}
	var c nodes.Caller
	parent := ""
	for name, vs := range h {
		if len(vs) == 0 {
			continue
		}
		switch {
		case strings.EqualFold(name, HeaderTraceParent):
			if isTraceParent(vs[0]) {
				parent = vs[0]
			}
		case strings.EqualFold(name, HeaderTenant):
			c.Tenant = vs[0]
		case strings.EqualFold(name, HeaderUser):
			c.User = vs[0]
		case strings.EqualFold(name, HeaderTrace):
			c.Trace = vs[0]
		case len(name) > len(HeaderCtxPrefix) && strings.EqualFold(name[:len(HeaderCtxPrefix)], HeaderCtxPrefix):
			if c.Values == nil {
				c.Values = map[string]string{}
			}
			c.Values[name[len(HeaderCtxPrefix):]] = vs[0]
		}
	}
	if c.Trace == "" {
		c.Trace = parent
	}
	return CallerKV(c)
}

// isTraceParent reports whether v has the form of a W3C traceparent
// (version 00: 00-<32 hex>-<16 hex>-<2 hex>).
func isTraceParent(v string) bool {
	if len(v) != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		c := v[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// callerAttrs are the event attributes naming a firing's caller.
func callerAttrs(kvs []*pb.KV) []*pb.KV {
	var out []*pb.KV
	for _, kv := range kvs {
		switch kv.GetKey() {
		case "tenant", "user", "trace":
			out = append(out, &pb.KV{Key: kv.GetKey(), Value: kv.GetValue()})
		}
	}
	return out
}

// mergeMetadata merges metadata lists in order (later keys win) and then
// the node's own additions; nil when there is none.
func mergeMetadata(batch []*pb.Envelope) map[string]string {
	var out map[string]string
	for _, env := range batch {
		for _, kv := range env.GetMetadata() {
			if out == nil {
				out = map[string]string{}
			}
			out[kv.GetKey()] = kv.GetValue()
		}
	}
	return out
}
