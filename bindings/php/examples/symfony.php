<?php

// The README's Symfony Lock sample, run by tests/Integration/ReadmeSamplesTest.php
// against the nodes of REDLOCK_URLS (comma-separated URLs), with symfony/lock from
// Debian's php-symfony-lock. Says on stdout whether the work ran holding the lock.
//
//   REDLOCK_URLS=redis://127.0.0.1:6379,... php examples/symfony.php

declare(strict_types=1);

use Redlock\Redlock;

require dirname(__DIR__) . '/vendor/autoload.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

$urls = explode(',', (string) getenv('REDLOCK_URLS'));
$lock = null;
$work = static function () use (&$lock): void {
    echo 'working, lock held: ' . ($lock->isAcquired() ? 'yes' : 'no') . "\n";
};

use Redlock\Symfony\RedlockStore;
use Symfony\Component\Lock\LockFactory;

$factory = new LockFactory(new RedlockStore(Redlock::create($urls)));
$lock = $factory->createLock('orders:42', 30.0);
if ($lock->acquire()) {            // acquire(true) waits, listening for release notices
    try {
        $work();
        $lock->refresh();    // extends it
    } finally {
        $lock->release();
    }
}

echo 'afterwards, lock held: ' . ($lock->isAcquired() ? 'yes' : 'no') . "\n";
