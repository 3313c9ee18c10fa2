// OpenTelemetry spans, one per operation (acquire, extend, release, inspect), built from
// the core's events: `retry` and `node_failed` become span events, the outcome sets the
// span's attributes and status. @opentelemetry/api is an optional peer dependency: the
// Node.js entry loads it when it is installed (`tracer: true` then uses its global
// tracer); any OpenTelemetry Tracer can also be handed in (`tracer: myTracer`).

// SpanStatusCode of @opentelemetry/api (a stable numeric enum).
const STATUS_OK = 1;
const STATUS_ERROR = 2;

let api;

/** @internal The Node.js entry hands in @opentelemetry/api when it is installed. */
export function setTracingApi(module) {
  api = module;
}

/** The tracer for the `tracer` option: a Tracer, `true` (the global one), or none. */
export function resolveTracer(option, version) {
  if (option === undefined || option === false) return undefined;
  if (option === true) {
    if (api === undefined) return null;
    return api.trace.getTracer('redlock-core', version);
  }
  if (typeof option === 'object' && option !== null && typeof option.startSpan === 'function') return option;
  return null;
}

/** Starts the span of one operation. */
export function startSpan(tracer, kind, resources) {
  return tracer.startSpan(`redlock.${kind}`, {
    attributes: { 'redlock.operation': kind, 'redlock.resources': resources ?? [] },
  });
}

/** Records one core event on the operation's span; ends nothing. */
export function recordEvent(span, event) {
  switch (event.kind) {
    case 'retry':
      span.addEvent('retry', {
        'redlock.attempt': event.attempt,
        'redlock.reason': event.reason ?? '',
        'redlock.retry_at_us': event.retryAtUs ?? 0,
      });
      return;
    case 'node_failed':
      span.addEvent('node_failed', {
        'redlock.node': event.node ?? -1,
        'redlock.cause': event.cause ?? '',
        'redlock.attempt': event.attempt,
      });
      return;
    default: {
      // The outcome.
      span.setAttribute('redlock.outcome', event.kind);
      span.setAttribute('redlock.attempts', event.attempt);
      span.setAttribute('redlock.elapsed_us', event.elapsedUs);
      if (event.reason !== null) span.setAttribute('redlock.reason', event.reason);
      const failed = event.kind.startsWith('not_');
      span.setStatus(failed ? { code: STATUS_ERROR, message: `${event.kind}${event.reason ? `: ${event.reason}` : ''}` } : { code: STATUS_OK });
    }
  }
}

/** Ends a span whose operation stopped without an outcome (cancelled, closed). */
export function endWithError(span, message) {
  span.setStatus({ code: STATUS_ERROR, message });
  span.end();
}
