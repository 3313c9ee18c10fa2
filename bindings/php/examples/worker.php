<?php

// A worker of `make demo` and of the contention tests: DEMO_ROUNDS times, lock
// DEMO_RESOURCE on the nodes of REDLOCK_NODES and, holding it, read the counter file
// DEMO_COUNTER, sleep ~5 ms, write it + 1 (a read-modify-write that loses updates
// whenever two holders overlap). One JSON line per acquisition goes to DEMO_STATS:
//   {"event":"acquired","attempts":N,"acquire_us":MICROSECONDS}
// With DEMO_MARKER set, the critical section also creates that file exclusively and
// removes it at the end: two holders at once make the worker fail loudly. With
// DEMO_FENCE set, the worker takes fencing tokens and the counter is fenced: a write
// goes ahead only if the lock's token is above the one recorded in that file, which it
// then records (a stale token makes the worker fail), and each stats line carries
// "fencing_token".
//
//   php examples/worker.php [stream|phpredis]

declare(strict_types=1);

use Redlock\Clock;
use Redlock\Lock;
use Redlock\Options;
use Redlock\Redlock;

require dirname(__DIR__) . '/vendor/autoload.php';

$driver = $argv[1] ?? 'stream';
$env = static function (string $name, ?string $default = null): string {
    $value = getenv($name);
    if ($value === false || $value === '') {
        if ($default === null) {
            fwrite(STDERR, "worker: $name is not set\n");
            exit(2);
        }
        return $default;
    }
    return $value;
};
$urls = explode(',', $env('REDLOCK_NODES'));
$resource = $env('DEMO_RESOURCE');
$counter = $env('DEMO_COUNTER');
$rounds = (int) $env('DEMO_ROUNDS', '20');
$stats = getenv('DEMO_STATS') ?: null;
$marker = getenv('DEMO_MARKER') ?: null;
$fence = getenv('DEMO_FENCE') ?: null;

// Contention is expected: many short retries rather than a few long ones.
$options = new Options(ttlMs: 5_000, attempts: 100_000, retryDelayMs: 10, retryJitterMs: 8, fencing: $fence !== null);
if ($driver === 'phpredis') {
    $nodes = [];
    foreach ($urls as $url) {
        $parts = parse_url($url);
        $redis = new Redis();
        $redis->connect($parts['host'] ?? '127.0.0.1', $parts['port'] ?? 6379, 1.0);
        if (isset($parts['pass'])) {
            $redis->auth(rawurldecode($parts['pass']));
        }
        $nodes[] = $redis;
    }
    $redlock = Redlock::withPhpRedis($nodes, $options);
} elseif ($driver === 'stream') {
    $redlock = Redlock::create($urls, $options);
} else {
    fwrite(STDERR, "worker: unknown driver '$driver' (stream or phpredis)\n");
    exit(2);
}

for ($i = 0; $i < $rounds; $i++) {
    $started = Clock::nowUs();
    $redlock->synchronized($resource, 5_000, static function (Lock $lock) use ($counter, $marker, $fence, $stats, $started): void {
        $acquireUs = Clock::nowUs() - $started;
        if ($marker !== null) {
            $handle = @fopen($marker, 'x');
            if ($handle === false) {
                fwrite(STDERR, "worker: two holders at once ($marker exists)\n");
                exit(3);
            }
            fclose($handle);
        }
        $token = $lock->fencingToken();
        if ($fence !== null) {
            $seen = (int) trim((string) file_get_contents($fence));
            if ($token === null || $token <= $seen) {
                fwrite(STDERR, "worker: stale fencing token $token, counter saw $seen\n");
                exit(3);
            }
        }
        $value = (int) trim((string) file_get_contents($counter));
        usleep(5_000);
        file_put_contents($counter, ($value + 1) . "\n");
        if ($fence !== null) {
            file_put_contents($fence, $token . "\n");
        }
        if ($marker !== null) {
            unlink($marker);
        }
        if ($stats !== null) {
            $fields = ['event' => 'acquired', 'attempts' => $lock->attempts(), 'acquire_us' => $acquireUs];
            if ($token !== null) {
                $fields['fencing_token'] = $token;
            }
            $line = json_encode($fields);
            file_put_contents($stats, $line . "\n", FILE_APPEND | LOCK_EX);
        }
    });
}
$redlock->close();
