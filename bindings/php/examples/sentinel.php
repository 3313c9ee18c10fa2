<?php

// The README's Sentinel sample, run by tests/Integration/SentinelTest.php: locks
// orders:42 on the master the Sentinels of REDLOCK_SENTINELS (comma-separated URLs)
// name for the service given as the first argument.
//
//   REDLOCK_SENTINELS=redis://127.0.0.1:26379 php examples/sentinel.php mymaster

declare(strict_types=1);

use Redlock\Lock;
use Redlock\Options;
use Redlock\Redlock;
use Redlock\Sentinel;

require dirname(__DIR__) . '/vendor/autoload.php';

$sentinels = explode(',', (string) getenv('REDLOCK_SENTINELS'));
$service = $argv[1] ?? 'mymaster';

$redlock = Redlock::sentinel(new Sentinel($sentinels, $service), new Options(ttlMs: 10_000));
$redlock->synchronized('orders:42', 10_000, function (Lock $lock): void {
    echo 'locked ' . implode(',', $lock->resources()) . " on the master\n";
});
