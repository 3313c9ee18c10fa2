<?php

// End-to-end acquire + release latency on five local Redis nodes, side by side in one
// run: this package's stream driver and phpredis driver (core defaults: node timeout
// 50 ms), and Symfony Lock's CombinedStore over five RedisStores with the
// ConsensusStrategy (phpredis with a 50 ms read timeout, without which it would not
// return at all with a frozen node). Healthy, then with node 0 frozen (SIGSTOP).
// Clients take turns in blocks so that a noisy neighbour hits them all alike.
//
//   php bench/bench.php [--cycles N] [--frozen-cycles N] [--base-port P]
//
// Targets (checked and printed): the stream driver's healthy p50 at most half of
// Symfony's; its p50 with a frozen node within 1.3x of its own healthy p50.

declare(strict_types=1);

use Redlock\Clock;
use Redlock\Redlock;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\CombinedStore;
use Symfony\Component\Lock\Store\RedisStore;
use Symfony\Component\Lock\Strategy\ConsensusStrategy;

require dirname(__DIR__) . '/vendor/autoload.php';
require '/usr/share/php/Symfony/Component/Lock/autoload.php';

$options = getopt('', ['cycles:', 'frozen-cycles:', 'base-port:']);
$cycles = (int) ($options['cycles'] ?? 2000);
$frozenCycles = (int) ($options['frozen-cycles'] ?? 60);
$basePort = (int) ($options['base-port'] ?? 7540);
$repo = dirname(__DIR__, 3);
$nodesScript = escapeshellarg("$repo/scripts/redis-nodes.sh");

$run = static function (string $command) use ($nodesScript, $basePort): string {
    exec("$nodesScript $command --base-port $basePort 2>&1", $out, $status);
    if ($status !== 0) {
        fwrite(STDERR, "bench: redis-nodes.sh $command failed: " . implode("\n", $out) . "\n");
        exit(1);
    }
    return implode("\n", $out);
};
$urls = explode("\n", trim($run('start --nodes 5')));
register_shutdown_function(static function () use ($run): void {
    $run('resume 0');
    $run('stop');
});

/** @return list<\Redis> */
$phpredis = static function (float $readTimeout) use ($basePort): array {
    $nodes = [];
    for ($i = 0; $i < 5; $i++) {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', $basePort + $i, 1.0, null, 0, $readTimeout);
        $nodes[] = $redis;
    }
    return $nodes;
};

$stream = Redlock::create($urls);
$ours = Redlock::withPhpRedis($phpredis(0.0));
$symfony = new LockFactory(new CombinedStore(
    array_map(static fn (\Redis $r): RedisStore => new RedisStore($r), $phpredis(0.05)),
    new ConsensusStrategy(),
));

/** One acquire + release per call; returns microseconds. */
$clients = [
    'redlock stream driver' => static function (string $resource) use ($stream): int {
        $started = Clock::nowUs();
        $stream->acquire($resource)->release();
        return Clock::nowUs() - $started;
    },
    'redlock phpredis driver' => static function (string $resource) use ($ours): int {
        $started = Clock::nowUs();
        $ours->acquire($resource)->release();
        return Clock::nowUs() - $started;
    },
    'Symfony CombinedStore (5 RedisStore, consensus)' => static function (string $resource) use ($symfony): int {
        $started = Clock::nowUs();
        $lock = $symfony->createLock($resource, 10.0, false);
        if (!$lock->acquire(false)) {
            throw new \RuntimeException("Symfony did not acquire $resource");
        }
        $lock->release();
        return Clock::nowUs() - $started;
    },
];

/** @param list<int> $samples */
$percentile = static function (array $samples, float $p): float {
    sort($samples);
    return $samples[min(count($samples) - 1, (int) floor($p * count($samples)))] / 1000;
};

/** @return array<string, list<int>> */
$measure = static function (int $perClient, string $scenario) use ($clients): array {
    $samples = array_fill_keys(array_keys($clients), []);
    $block = max(1, min(100, intdiv($perClient, 5)));
    foreach ($clients as $name => $cycle) {
        for ($i = 0; $i < min(20, $perClient); $i++) {
            $cycle("bench:$scenario:warm");
        }
    }
    for ($done = 0; $done < $perClient; $done += $block) {
        foreach ($clients as $name => $cycle) {
            for ($i = 0; $i < $block && $done + $i < $perClient; $i++) {
                $samples[$name][] = $cycle("bench:$scenario");
            }
        }
    }
    return $samples;
};

printf("PHP %s, %d cycles per client healthy, %d with node 0 frozen\n\n", PHP_VERSION, $cycles, $frozenCycles);
$healthy = $measure($cycles, 'healthy');
$run('pause 0');
$frozen = $measure($frozenCycles, 'frozen');
$run('resume 0');

printf("%-50s %12s %12s %12s %12s\n", 'acquire + release, ms', 'healthy p50', 'healthy p99', 'frozen p50', 'frozen p99');
$table = [];
foreach (array_keys($clients) as $name) {
    $row = [
        $percentile($healthy[$name], 0.5),
        $percentile($healthy[$name], 0.99),
        $percentile($frozen[$name], 0.5),
        $percentile($frozen[$name], 0.99),
    ];
    $table[$name] = $row;
    printf("%-50s %12.3f %12.3f %12.3f %12.3f\n", $name, ...$row);
}

$streamName = 'redlock stream driver';
$symfonyName = 'Symfony CombinedStore (5 RedisStore, consensus)';
$ratioSymfony = $table[$streamName][0] / $table[$symfonyName][0];
$ratioFrozen = $table[$streamName][2] / $table[$streamName][0];
printf("\nstream driver healthy p50 / Symfony healthy p50: %.2f (target <= 0.50) %s\n", $ratioSymfony, $ratioSymfony <= 0.5 ? 'met' : 'MISSED');
printf("stream driver frozen p50 / its healthy p50:      %.2f (target <= 1.30) %s\n", $ratioFrozen, $ratioFrozen <= 1.3 ? 'met' : 'MISSED');
echo json_encode(['p50_p99_ms' => $table, 'ratio_vs_symfony' => round($ratioSymfony, 3), 'ratio_frozen' => round($ratioFrozen, 3)]), "\n";
