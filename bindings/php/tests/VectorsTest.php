<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\ConfigurationException;
use Redlock\Exception\CoreException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Client;
use Redlock\Ffi\Config;
use Redlock\Ffi\Constants;
use Redlock\Ffi\KeepAlive;
use Redlock\Ffi\Lease;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Outcome;

/**
 * Every conformance vector (tests/vectors/*.json, and the fencing/, waiting/, inspect/
 * and keepalive/ ones) replayed through FFI: the same outputs and outcomes as the Rust core, the C ABI and
 * the other bindings.
 */
final class VectorsTest extends TestCase
{
    private const SETTINGS = [
        'drift_factor', 'drift_fixed_us', 'node_timeout_us', 'min_validity_us', 'attempts',
        'retry_delay_us', 'retry_jitter_us', 'key_prefix', 'token_bytes', 'fencing',
    ];

    /** @return iterable<string, array{string}> */
    public static function vectors(): iterable
    {
        $files = glob(VectorSupport::vectorsDir() . '/*.json') ?: [];
        self::assertGreaterThan(50, count($files), 'the conformance vectors are missing');
        foreach ($files as $file) {
            yield basename($file, '.json') => [$file];
        }
        // At least this many in each folder: a moved folder must not pass as "nothing failed".
        foreach (['fencing' => 1, 'waiting' => 1, 'inspect' => 1, 'keepalive' => 4] as $dir => $least) {
            $files = glob(VectorSupport::vectorsDir() . "/$dir/*.json") ?: [];
            self::assertGreaterThanOrEqual($least, count($files), "the $dir vectors are missing");
            foreach ($files as $file) {
                yield "$dir/" . basename($file, '.json') => [$file];
            }
        }
    }

    /** @dataProvider vectors */
    public function testVector(string $file): void
    {
        $vector = json_decode((string) file_get_contents($file), true, 512, JSON_THROW_ON_ERROR);
        $this->assertSame(basename($file, '.json'), $vector['name']);
        $native = Native::get();
        $settings = array_intersect_key($vector['config'], array_flip(self::SETTINGS));

        if (isset($vector['config_error'])) {
            try {
                Config::build($native, $vector['config']['nodes'], $vector['config']['ttl_ms'], $settings);
                $this->fail("configuration accepted, expected {$vector['config_error']}");
            } catch (ConfigurationException $e) {
                $this->assertSame($vector['config_error'], $e->codeName);
            }
            return;
        }
        $config = Config::build($native, $vector['config']['nodes'], $vector['config']['ttl_ms'], $settings);
        $client = Client::create($config, str_repeat("\0", 32));

        /** @var array<string, Operation> $ops */
        $ops = [];
        /** @var array<string, Lease> $leases */
        $leases = [];
        /** @var array<string, Outcome> $outcomes the last outcome each operation handed out */
        $outcomes = [];
        /** @var array<string, KeepAlive> $keepAlives */
        $keepAlives = [];
        $last = null;
        foreach ($vector['steps'] as $index => $step) {
            $where = "step $index";
            $expectedError = $step['error'] ?? null;
            $name = $step['op'] ?? $last;
            $keepAliveOutputs = $this->keepAliveStep($step, $client, $leases, $outcomes, $keepAlives);
            if ($keepAliveOutputs !== null) {
                $this->assertSame($step['expect'], $keepAliveOutputs, "$where of {$vector['name']}");
                continue;
            }
            try {
                if (isset($step['lease']) && !isset($step['extend']) && !isset($step['release'])) {
                    $leases[$step['name']] = $client->lease($step['lease']['resources'], $step['lease']['token'], $step['lease']['valid_until']);
                    $this->assertNull($expectedError, "$where: lease built, expected {$expectedError}");
                    continue;
                }
                if (isset($step['acquire'])) {
                    $random = (string) hex2bin($step['acquire']['random']);
                    $op = isset($step['acquire']['wait_ms'])
                        ? $client->acquireWaitingWithRandom($step['acquire']['resources'], $step['acquire']['wait_ms'] * 1000, $random, $step['now'])
                        : $client->acquireWithRandom($step['acquire']['resources'], $random, $step['now']);
                    // Per key its notice channel, then (a waiter) its waiter channel, named
                    // by the first 16 characters of the waiter id (the first token).
                    $prefix = (string) ($vector['config']['key_prefix'] ?? '');
                    $resources = array_map(static fn (string $r): string => $prefix . $r, $step['acquire']['resources']);
                    $expected = array_map(static fn (string $r): string => 'redlock:released:' . $r, $resources);
                    if (isset($step['acquire']['wait_ms']) && empty($vector['config']['fencing'])) {
                        $listener = bin2hex(substr($random, 0, 8));
                        foreach ($resources as $r) {
                            $expected[] = "redlock:waiter:{$listener}:{$r}";
                        }
                    }
                    $this->assertSame($expected, $op->noticeChannels(), $where);
                    $ops[$step['op']] = $op;
                    $last = $step['op'];
                } elseif (isset($step['inspect'])) {
                    $op = $client->inspect($step['inspect']['resources'], $step['now']);
                    $this->assertSame(Constants::OPERATION_INSPECT, $op->kind());
                    $ops[$step['op']] = $op;
                    $last = $step['op'];
                } elseif (isset($step['extend'])) {
                    $lease = $leases[$step['extend']['lease']] ?? $this->fail("$where: no lease");
                    $op = $client->extend($lease, $step['extend']['ttl_ms'] ?? null, $step['now']);
                    $ops[$step['op']] = $op;
                    $last = $step['op'];
                } elseif (isset($step['release'])) {
                    $op = $client->release($leases[$step['release']['lease']] ?? $this->fail("$where: no lease"), $step['now']);
                    $ops[$step['op']] = $op;
                    $last = $step['op'];
                } elseif (isset($step['reply'])) {
                    $op = $ops[$name];
                    $reply = VectorSupport::reply($native, $step['reply']['value']);
                    $native->check($op->handleReply($step['reply']['request'], $reply, $step['now']), 'reply');
                } elseif (isset($step['timeout'])) {
                    $op = $ops[$name];
                    $op->handleTimeout($step['now']);
                } elseif (isset($step['notice'])) {
                    $op = $ops[$name];
                    // With a message: its UTF-8 bytes, as a subscriber would receive them.
                    if (isset($step['notice']['message'])) {
                        $op->handleNoticeMessage($step['notice']['node'], $step['notice']['message'], $step['now']);
                    } else {
                        $op->handleNotice($step['notice']['node'], $step['now']);
                    }
                } elseif (isset($step['subscribed'])) {
                    $op = $ops[$name];
                    $op->handleSubscribed($step['subscribed']['node'], $step['now']);
                } elseif (isset($step['abandon'])) {
                    $op = $ops[$name];
                    $op->abandon($step['now']);
                } else {
                    $this->fail("$where: unknown step " . json_encode($step));
                }
            } catch (InvalidArgumentException | CoreException $e) {
                $this->assertSame($expectedError, $e->codeName, "$where: " . $e->getMessage());
                $this->assertSame([], $step['expect'] ?? [], "$where: a failed call produces no outputs");
                continue;
            }
            $this->assertNull($expectedError, "$where: the call succeeded, expected $expectedError");
            $outputs = $this->drain($op, $leases, $outcomes, (string) ($step['op'] ?? $name));
            $this->assertSame(
                self::normalise($step['expect'], $native),
                $outputs,
                "$where of {$vector['name']}"
            );
            // Whether the operation listens for release notices now (the core says).
            if (isset($step['listens'])) {
                $this->assertSame($step['listens'], $op->listens(), "$where: listens");
            }
        }
    }

    /**
     * A keep-alive step (`keepalive`, `keepalive_outcome`, `keepalive_failure`,
     * `keepalive_stop`, `keepalive_poll`): its input, then one poll at `now`; the outputs
     * `[<action>, ['valid_until' => <us>]]`, or null for a step of another kind. The
     * keep-alive's lease afterwards is kept under its name, for extensions of it
     * (core/tests/vectors.rs keepalive_step).
     *
     * @param array<string, mixed> $step
     * @param array<string, Lease> $leases
     * @param array<string, Outcome> $outcomes
     * @param array<string, KeepAlive> $keepAlives
     * @return list<array<string, mixed>>|null
     */
    private function keepAliveStep(array $step, Client $client, array &$leases, array $outcomes, array &$keepAlives): ?array
    {
        if (!isset($step['name'])) {
            return null;
        }
        $name = $step['name'];
        $now = $step['now'] ?? 0;
        if (isset($step['keepalive'])) {
            $lease = $leases[$step['keepalive']['lease']] ?? $this->fail("no lease named {$step['keepalive']['lease']}");
            $keepAlives[$name] = KeepAlive::create($client, $lease);
        } elseif (isset($step['keepalive_outcome'])) {
            $op = $step['keepalive_outcome']['op'];
            $outcome = $outcomes[$op] ?? $this->fail("no outcome of $op");
            $this->keepAlive($keepAlives, $name)->handleOutcome($outcome, $now);
        } elseif (isset($step['keepalive_failure'])) {
            $this->keepAlive($keepAlives, $name)->handleFailure($now);
        } elseif (isset($step['keepalive_stop'])) {
            $this->keepAlive($keepAlives, $name)->stop();
        } elseif (!isset($step['keepalive_poll'])) {
            return null;
        }
        $keepAlive = $this->keepAlive($keepAlives, $name);
        [$action, $until, $reason] = $keepAlive->poll($now);
        $output = match ($action) {
            Constants::KEEPALIVE_EXTEND => ['extend' => []],
            Constants::KEEPALIVE_WAIT => ['wait' => $until],
            Constants::KEEPALIVE_LOST => ['lost' => KeepAlive::lostReasonName($keepAlive->native, $reason)],
            Constants::KEEPALIVE_STOPPED => ['stopped' => []],
            default => $this->fail("unknown keep-alive action $action"),
        };
        $lease = $keepAlive->lease();
        $leases[$name] = $lease;
        return [$output, ['valid_until' => $lease->validUntilUs()]];
    }

    /** @param array<string, KeepAlive> $keepAlives */
    private function keepAlive(array $keepAlives, string $name): KeepAlive
    {
        return $keepAlives[$name] ?? $this->fail("no keep-alive named $name");
    }

    /**
     * Polls until nothing is left, in the vectors' JSON form.
     *
     * @param array<string, Lease> $leases
     * @param array<string, Outcome> $outcomes
     * @return list<array<string, mixed>>
     */
    private function drain(Operation $op, array &$leases, array &$outcomes, string $name): array
    {
        $outputs = [];
        for ($guard = 0; $guard < 10_000; $guard++) {
            $kind = $op->poll();
            if ($kind === Constants::OUTPUT_NONE) {
                return $outputs;
            }
            if ($kind === Constants::OUTPUT_SEND) {
                [$node, $request, $deadline, $argc] = $op->command();
                $argv = $op->commandArgs($argc);
                $this->assertSame(self::resp($argv), $op->commandResp(), 'the RESP encoding matches the arguments');
                $outputs[] = ['send' => ['node' => $node, 'request' => $request, 'deadline' => $deadline, 'argv' => $argv]];
            } elseif ($kind === Constants::OUTPUT_WAIT) {
                $outputs[] = ['wait' => $op->waitUntil()];
            } elseif ($kind === Constants::OUTPUT_OUTCOME) {
                $outcome = $op->takeOutcome();
                // Kept for `keepalive_outcome` steps.
                $outcomes[$name] = $outcome;
                if ($outcome->lease() !== null) {
                    $leases[$name] = $outcome->lease();
                    $this->assertSame($outcome->fencingToken(), $outcome->lease()->fencingToken(), 'the lease carries the fencing token');
                }
                $outputs[] = ['outcome' => self::outcome($outcome)];
            } else {
                $this->fail("unknown output kind $kind");
            }
        }
        $this->fail('the operation never stopped producing outputs');
    }

    /** @param list<string> $argv */
    private static function resp(array $argv): string
    {
        $out = '*' . count($argv) . "\r\n";
        foreach ($argv as $arg) {
            $out .= '$' . strlen($arg) . "\r\n" . $arg . "\r\n";
        }
        return $out;
    }

    /** @return array<string, mixed> */
    private static function outcome(Outcome $o): array
    {
        $nodes = array_map(static function (array $node): string|array {
            [$kind, $text] = $node;
            return $kind === Constants::NODE_ERROR ? ['error' => $text] : Constants::NODE_STATUSES[$kind];
        }, $o->nodes());
        $kind = Constants::OUTCOME_KINDS[$o->kind];
        return match ($o->kind) {
            Constants::OUTCOME_ACQUIRED => [
                'kind' => $kind,
                'token' => $o->token(),
                'valid_until' => $o->validUntilUs(),
                'validity' => $o->validityUs(),
                'attempts' => $o->attempts(),
                'nodes' => $nodes,
            ] + ($o->fencingToken() === null ? [] : ['fencing_token' => $o->fencingToken()]),
            Constants::OUTCOME_NOT_ACQUIRED => [
                'kind' => $kind,
                'reason' => $o->reasonName(),
                'attempts' => $o->attempts(),
                'token' => $o->token(),
                'nodes' => $nodes,
            ],
            Constants::OUTCOME_EXTENDED => [
                'kind' => $kind,
                'token' => $o->token(),
                'valid_until' => $o->validUntilUs(),
                'validity' => $o->validityUs(),
                'extensions' => $o->extensions(),
                'nodes' => $nodes,
            ],
            Constants::OUTCOME_NOT_EXTENDED => [
                'kind' => $kind,
                'reason' => $o->reasonName(),
                'valid_until' => $o->validUntilUs(),
                'validity' => $o->validityUs(),
                'retry_at' => $o->retryAtUs(),
                'nodes' => $nodes,
            ],
            Constants::OUTCOME_INSPECTED => ['kind' => $kind, 'holder' => $o->holder(), 'nodes' => $nodes],
            Constants::OUTCOME_NOT_INSPECTED => ['kind' => $kind, 'nodes' => $nodes],
            default => ['kind' => $kind, 'released' => $o->released(), 'nodes' => $nodes],
        };
    }

    /**
     * The expected outputs with script placeholders replaced, and outcome fields in
     * the order outcome() writes them (only those the vector states).
     *
     * @param list<array<string, mixed>> $expect
     * @return list<array<string, mixed>>
     */
    private static function normalise(array $expect, Native $native): array
    {
        $scripts = [
            '{{ACQUIRE_SCRIPT}}' => (string) $native->ffi->redlock_script_text(Constants::SCRIPT_ACQUIRE),
            '{{RELEASE_SCRIPT}}' => (string) $native->ffi->redlock_script_text(Constants::SCRIPT_RELEASE),
            '{{EXTEND_SCRIPT}}' => (string) $native->ffi->redlock_script_text(Constants::SCRIPT_EXTEND),
            '{{FENCED_ACQUIRE_SCRIPT}}' => (string) $native->ffi->redlock_script_text(Constants::SCRIPT_FENCED_ACQUIRE),
            '{{WRITE_BACK_SCRIPT}}' => (string) $native->ffi->redlock_script_text(Constants::SCRIPT_WRITE_BACK),
            '{{QUEUED_ACQUIRE_SCRIPT}}' => (string) $native->ffi->redlock_script_text(Constants::SCRIPT_QUEUED_ACQUIRE),
        ];
        $out = [];
        foreach ($expect as $output) {
            if (isset($output['send'])) {
                $send = $output['send'];
                $send['argv'] = array_map(static fn (string $a): string => $scripts[$a] ?? $a, $send['argv']);
                $out[] = [
                    'send' => ['node' => $send['node'], 'request' => $send['request'], 'deadline' => $send['deadline'], 'argv' => $send['argv']],
                ];
            } elseif (isset($output['outcome'])) {
                $order = [
                    'kind', 'reason', 'token', 'valid_until', 'validity', 'attempts', 'extensions', 'retry_at', 'released', 'nodes',
                    'fencing_token', 'holder',
                ];
                $outcome = $output['outcome'];
                $sorted = [];
                $layout = match ($outcome['kind']) {
                    'acquired' => ['kind', 'token', 'valid_until', 'validity', 'attempts', 'nodes'],
                    'not_acquired' => ['kind', 'reason', 'attempts', 'token', 'nodes'],
                    'extended' => ['kind', 'token', 'valid_until', 'validity', 'extensions', 'nodes'],
                    'not_extended' => ['kind', 'reason', 'valid_until', 'validity', 'retry_at', 'nodes'],
                    'inspected' => ['kind', 'holder', 'nodes'],
                    'not_inspected' => ['kind', 'nodes'],
                    default => ['kind', 'released', 'nodes'],
                };
                foreach ($layout as $key) {
                    $sorted[$key] = array_key_exists($key, $outcome) ? $outcome[$key] : '(not in the vector)';
                }
                if (array_key_exists('fencing_token', $outcome)) {
                    $sorted['fencing_token'] = $outcome['fencing_token'];
                }
                $extra = array_diff(array_keys($outcome), $order);
                if ($extra !== []) {
                    throw new \UnexpectedValueException('unknown outcome fields: ' . implode(', ', $extra));
                }
                $out[] = ['outcome' => $sorted];
            } else {
                $out[] = $output;
            }
        }
        return $out;
    }
}
