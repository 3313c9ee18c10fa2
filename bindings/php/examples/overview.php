<?php

// The README's overview sample, run by tests/Integration/ReadmeSamplesTest.php against
// the nodes of REDLOCK_URLS (comma-separated URLs) and a fenced store at REDLOCK_STORE.
// The events the listener logs go to stderr; what the sample produced goes to stdout.
//
//   REDLOCK_URLS=redis://127.0.0.1:6379,... REDLOCK_STORE=redis://127.0.0.1:6390 php examples/overview.php

declare(strict_types=1);

require dirname(__DIR__) . '/vendor/autoload.php';

$urls = explode(',', (string) getenv('REDLOCK_URLS'));
$storeUrl = (string) getenv('REDLOCK_STORE');
$batches = [[1, 2, 3], [4, 5], [6]];
$json = json_encode(['order' => 42, 'state' => 'paid'], JSON_THROW_ON_ERROR);
[$redis1, $redis2, $redis3, $redis4, $redis5] = array_map(static function (string $url): Redis {
    $parts = parse_url($url);
    $redis = new Redis();
    $redis->connect((string) $parts['host'], (int) $parts['port'], 2.0);
    return $redis;
}, $urls);

use Redlock\Event;
use Redlock\FencedStore;
use Redlock\Lock;
use Redlock\Options;
use Redlock\Redlock;

// $urls: one URL per independent node, e.g. 'redis://10.0.0.1:6379' ... 'redis://10.0.0.5:6379'
$redlock = Redlock::create($urls);

// Every event the core reports (acquired, retry, released, node_failed, lost, ...):
$redlock->addEventListener(fn (Event $e) => error_log((string) $e));

// Runs the callback holding the lock and releases it afterwards, whatever happens.
$total = $redlock->synchronized('orders:42', 10_000, function (Lock $lock) use ($batches): int {
    $total = 0;
    foreach ($batches as $batch) {
        $lock->keepAlive();    // extends when the core says so; throws if the lock is lost
        $total += array_sum($batch);
    }
    return $total;
});

// Or by hand:
$lock = $redlock->acquire('orders:42', 10_000);   // LockHeldException / NodesFailedException
try {
    $lock->extend(30_000);                          // LockLostException / NotHeldException / NodesFailedException
} finally {
    $lock->release();                               // never deletes another holder's key
}

// Keep-alive by the core's schedule, and a time limit on the acquisition:
$lock = $redlock->acquire('orders:42', 10_000, keepAlive: true, timeLimitMs: 500);  // CancelledException
$lock->release();

// null when someone else holds it (failing nodes still throw):
if (($report = $redlock->tryAcquire('report:nightly')) !== null) {
    $report->release();
}

// Wait up to 2 s for it (woken by the holder's release, not by polling):
$lock = $redlock->acquire('orders:42', waitMs: 2_000);              // LockHeldException at the limit

// Who holds it, decided by the core from every node (never changes a key):
$redlock->isLocked('orders:42');     // someone holds it (a quorum hold one token)
$lock->isOwned();                    // we do: our token on a quorum, our validity left
$lock->release();

// Fencing tokens, checked where the data lives ($storeUrl: e.g. 'redis://10.0.0.9:6379'):
$fenced = Redlock::create($urls, new Options(fencing: true));
$lock = $fenced->acquire('orders:42');
$write = FencedStore::create($storeUrl)->set('orders:42:state', $json, $lock);
if (!$write->accepted) {
    throw new RuntimeException("our lease ran out: a newer holder (token {$write->seen}) has written");
}
$lock->release();

// Your own phpredis objects, one per node:
$redlock = Redlock::withPhpRedis([$redis1, $redis2, $redis3, $redis4, $redis5], new Options(ttlMs: 10_000));

// One master found through Redis Sentinel: see "Sentinel" below.

echo "total $total\n";
echo 'fenced write ' . ($write->accepted ? 'accepted' : 'refused') . " with token {$write->token}\n";
$lock = $redlock->acquire('orders:42');
echo 'phpredis: locked ' . implode(',', $lock->resources()) . ' on ' . count($redlock->nodes()) . " nodes\n";
echo 'phpredis: released on ' . $lock->release() . " nodes\n";
