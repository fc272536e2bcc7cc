package engine

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/telemetry"
	"github.com/conchsh/conch/internal/store/approvals"
)

// Tracing (docs/operations.md, "Traces"): one trace per exec call, with
// spans for the policy decision, the approval wait and the run (to its end
// state), and one trace per approval. With tracing off the tracer is a
// no-op and none of this costs more than a check.

// startExecSpan starts the span of one exec call.
func startExecSpan(ctx context.Context, agent string, p apitype.ExecParams) (context.Context, trace.Span) {
	return telemetry.Tracer().Start(ctx, "conch.exec", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("conch.agent", agent),
		attribute.String("conch.command", p.Command),
		attribute.String("conch.host.requested", p.Host),
	))
}

// endExecSpan records a call's result on its span and ends it.
func endExecSpan(span trace.Span, res apitype.Result) {
	if span.IsRecording() {
		var d struct {
			Status       string `json:"status"`
			SessionID    string `json:"sessionId"`
			ExitCode     *int   `json:"exitCode"`
			ApprovalID   string `json:"approvalId"`
			ApprovalSlug string `json:"approvalSlug"`
			Error        *apitype.Error
		}
		if b, err := json.Marshal(res.Details); err == nil {
			json.Unmarshal(b, &d)
		}
		span.SetAttributes(attribute.String("conch.status", d.Status))
		if d.SessionID != "" {
			span.SetAttributes(attribute.String("conch.session_id", d.SessionID))
		}
		if d.ExitCode != nil {
			span.SetAttributes(attribute.Int("conch.exit_code", *d.ExitCode))
		}
		if d.ApprovalID != "" {
			span.SetAttributes(attribute.String("conch.approval_id", d.ApprovalID), attribute.String("conch.approval_slug", d.ApprovalSlug))
		}
		if d.Error != nil {
			span.SetAttributes(attribute.String("conch.error_code", d.Error.Code))
			span.SetStatus(codes.Error, d.Error.Message)
		}
	}
	span.End()
}

// traceSession names the session an exec call started on its span.
func traceSession(ctx context.Context, id string) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("conch.session_id", id))
}

// tracePolicy records the policy gate's decision as a span of the call.
func tracePolicy(ctx context.Context, start time.Time, g gateResult) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	_, span := telemetry.Tracer().Start(ctx, "conch.policy", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("conch.policy.outcome", g.decision.Outcome),
		attribute.String("conch.policy.reason", g.decision.Reason),
		attribute.String("conch.policy.security", string(g.eff.Security)),
		attribute.String("conch.policy.ask", string(g.eff.Ask)),
		attribute.Bool("conch.policy.run", g.run),
	))
	span.End()
}

// traceRun starts the span of a session's run, a child of the exec call
// that asked for it, and ends it with the session's end state (or when the
// engine stops while the session still runs).
func (e *Engine) traceRun(s *session, parent trace.SpanContext) {
	if !parent.IsValid() {
		return
	}
	ctx := trace.ContextWithSpanContext(context.Background(), parent)
	_, span := telemetry.Tracer().Start(ctx, "conch.run", trace.WithAttributes(attribute.String("conch.session_id", s.id)))
	if !span.IsRecording() {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case <-s.ended:
			_, ex, _ := s.snapshot()
			if ex != nil {
				span.SetAttributes(attribute.String("conch.end.state", ex.State))
				if ex.ExitCode != nil {
					span.SetAttributes(attribute.Int("conch.end.exit_code", *ex.ExitCode))
				}
				if ex.Signal != nil {
					span.SetAttributes(attribute.String("conch.end.signal", *ex.Signal))
				}
				if ex.KilledBy != nil {
					span.SetAttributes(attribute.String("conch.end.killed_by", *ex.KilledBy))
				}
			}
		case <-e.stop:
			span.SetAttributes(attribute.String("conch.end.state", "running"))
		}
		span.End()
	}()
}

// traceApproval records a decided (or expired) approval: a span of its
// own trace, linked to the exec call that asked, and the approval wait as
// a span of that call's trace.
func (e *Engine) traceApproval(s *session, req *approvals.Request) {
	s.mu.Lock()
	var parent trace.SpanContext
	if s.pendingRun != nil && s.pendingRun.plan != nil {
		parent = s.pendingRun.plan.Trace
	}
	s.mu.Unlock()
	start := time.UnixMilli(req.CreatedAtMs)
	end := time.Now()
	if req.DecidedAtMs > 0 {
		end = time.UnixMilli(req.DecidedAtMs)
	}
	attrs := []attribute.KeyValue{
		attribute.String("conch.approval_id", req.ID),
		attribute.String("conch.approval_slug", req.Slug),
		attribute.String("conch.agent", req.Agent),
		attribute.String("conch.session_id", req.SessionID),
		attribute.String("conch.command", req.Command),
		attribute.String("conch.approval.state", string(req.State)),
		attribute.String("conch.approval.decision", string(req.Decision)),
		attribute.String("conch.approval.decided_by", req.DecidedBy),
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(start), trace.WithAttributes(attrs...), trace.WithNewRoot()}
	if parent.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: parent}))
	}
	_, span := telemetry.Tracer().Start(context.Background(), "conch.approval", opts...)
	span.End(trace.WithTimestamp(end))
	if parent.IsValid() {
		ctx := trace.ContextWithSpanContext(context.Background(), parent)
		_, wait := telemetry.Tracer().Start(ctx, "conch.approval.wait", trace.WithTimestamp(start), trace.WithAttributes(attrs...))
		wait.End(trace.WithTimestamp(end))
	}
}
