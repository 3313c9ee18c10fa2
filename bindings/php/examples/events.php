<?php

// The README's samples on inspection, events and tracing, run by
// tests/Integration/ReadmeSamplesTest.php against the nodes of REDLOCK_URLS
// (comma-separated URLs). The tracer is a stand-in recording what the listener calls
// (the OpenTelemetry API is not installed here); what the samples recorded goes to stdout.
//
//   REDLOCK_URLS=redis://127.0.0.1:6379,... php examples/events.php

declare(strict_types=1);

use Redlock\Redlock;

require dirname(__DIR__) . '/vendor/autoload.php';

$redlock = Redlock::create(explode(',', (string) getenv('REDLOCK_URLS')));

/** Collects timings by name. */
$metrics = new class () {
    /** @var array<string, list<float|null>> */
    public array $timings = [];

    public function timing(string $name, ?float $ms): void
    {
        $this->timings[$name][] = $ms;
    }
};

/** Collects warnings. */
$logger = new class () {
    /** @var list<string> */
    public array $warnings = [];

    public function warning(string $message): void
    {
        $this->warnings[] = $message;
    }
};

/** Records spans through the builder calls of OpenTelemetry's tracer API. */
$tracer = new class () {
    /** @var list<array{name: string, start: int|null, end: int|null, attributes: array<string, mixed>}> */
    public array $spans = [];

    public function spanBuilder(string $name): object
    {
        $spans = &$this->spans;
        return new class ($name, $spans) {
            private ?int $start = null;

            /** @param list<array<string, mixed>> $spans */
            public function __construct(private string $name, private array &$spans)
            {
            }

            public function setStartTimestamp(int $ns): static
            {
                $this->start = $ns;
                return $this;
            }

            public function startSpan(): object
            {
                $this->spans[] = ['name' => $this->name, 'start' => $this->start, 'end' => null, 'attributes' => []];
                $index = array_key_last($this->spans);
                $spans = &$this->spans;
                return new class ($index, $spans) {
                    /** @param list<array<string, mixed>> $spans */
                    public function __construct(private int $index, private array &$spans)
                    {
                    }

                    public function setAttribute(string $key, mixed $value): static
                    {
                        $this->spans[$this->index]['attributes'][$key] = $value;
                        return $this;
                    }

                    public function end(?int $ns = null): void
                    {
                        $this->spans[$this->index]['end'] = $ns;
                    }
                };
            }
        };
    }
};

use Redlock\Event;

$redlock->addEventListener(function (Event $e) use ($metrics): void {
    // $e->kind: acquired, not_acquired, retry, extended, not_extended, released,
    //           not_released, inspected, not_inspected, node_failed, lost
    $metrics->timing("redlock.{$e->kind}", $e->elapsedMs());
}, onError: fn (\Throwable $error, Event $e) => $logger->warning("listener failed on {$e->kind}"));
use Redlock\Clock;

// With open-telemetry/api, where it is installed. Spans want epoch nanoseconds; the
// events' instants are hrtime() microseconds: one offset, taken once, converts them.
$epochOffsetUs = (int) (microtime(true) * 1e6) - Clock::nowUs();
$redlock->addEventListener(function (Event $e) use ($tracer, $epochOffsetUs): void {
    if ($e->operation === null || in_array($e->kind, [Event::RETRY, Event::NODE_FAILED], true)) {
        return; // per-attempt detail: span events on the operation's span, if wanted
    }
    $span = $tracer->spanBuilder("redlock.{$e->operation}")
        ->setStartTimestamp(($epochOffsetUs + $e->atUs - $e->elapsedUs) * 1000)
        ->startSpan();
    $span->setAttribute('redlock.resources', implode(',', $e->resources));
    $span->setAttribute('redlock.outcome', $e->kind);
    $span->setAttribute('redlock.attempt', $e->attempt);
    if ($e->reason !== null) {
        $span->setAttribute('redlock.reason', $e->reason);
    }
    $span->end(($epochOffsetUs + $e->atUs) * 1000);
});

$lock = $redlock->acquire('orders:42', 10_000);
$redlock->isLocked('orders:42');   // bool: does anyone hold it?
$redlock->holder('orders:42');     // ?string: the token that holds it
$lock->isOwned();                  // bool: do we?
$lock->release();
$other = Redlock::create(explode(',', (string) getenv('REDLOCK_URLS')));
$held = $other->acquire('orders:42', 10_000);
$redlock->tryAcquire('orders:42');
$held->release();

foreach ($metrics->timings as $name => $values) {
    echo "metric $name " . count($values) . "\n";
}
echo 'warnings ' . count($logger->warnings) . "\n";
$nowNs = (int) (microtime(true) * 1e9);
foreach ($tracer->spans as $span) {
    $a = $span['attributes'];
    $ordered = $span['start'] !== null && $span['end'] !== null && $span['start'] <= $span['end']
        && $span['end'] <= $nowNs && $span['start'] > $nowNs - 60_000_000_000;
    echo "span {$span['name']} {$a['redlock.outcome']} {$a['redlock.resources']} attempt {$a['redlock.attempt']}"
        . (isset($a['redlock.reason']) ? " reason {$a['redlock.reason']}" : '')
        . ($ordered ? ' timed' : ' untimed') . "\n";
}
