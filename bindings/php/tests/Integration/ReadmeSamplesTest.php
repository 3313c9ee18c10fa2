<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Redlock;

/**
 * The README's PHP samples: each block is a verbatim part of an example under
 * examples/, and each example runs here against real nodes (five lock nodes on ports
 * 7545-7549 and a fenced store on 7557), its output checked. The Sentinel sample runs in
 * SentinelTest.
 */
final class ReadmeSamplesTest extends TestCase
{
    private const BASE_PORT = 7545;
    private const STORE_PORT = 7557;

    /** @var list<string> */
    private static array $urls = [];
    private static string $store = '';

    public static function setUpBeforeClass(): void
    {
        self::$urls = Nodes::start(self::BASE_PORT, 5);
        self::$store = Nodes::start(self::STORE_PORT, 1)[0];
    }

    public static function tearDownAfterClass(): void
    {
        Nodes::stop(self::BASE_PORT);
        Nodes::stop(self::STORE_PORT);
    }

    protected function setUp(): void
    {
        foreach ([[self::BASE_PORT, 5], [self::STORE_PORT, 1]] as [$port, $count]) {
            for ($i = 0; $i < $count; $i++) {
                Nodes::redis($port, $i)->flushAll();
            }
        }
    }

    public function testEveryPhpBlockIsVerbatimInTheExampleItNames(): void
    {
        $package = dirname(__DIR__, 2);
        $lines = explode("\n", (string) file_get_contents("$package/README.md"));
        $checked = 0;
        for ($i = 0; $i < count($lines); $i++) {
            if ($lines[$i] !== '```php') {
                continue;
            }
            $end = $i + 1;
            while ($end < count($lines) && $lines[$end] !== '```') {
                $end++;
            }
            $block = array_slice($lines, $i + 1, $end - $i - 1);
            $previous = $i - 1;
            while ($previous >= 0 && trim($lines[$previous]) === '') {
                $previous--;
            }
            $where = 'README.md:' . ($i + 1);
            $this->assertSame(
                1,
                preg_match('/^<!-- sample: bindings\/php\/(\S+) -->$/', $lines[$previous] ?? '', $marker),
                "$where: a php block without a sample marker",
            );
            $this->assertFileExists("$package/{$marker[1]}", $where);
            $source = explode("\n", (string) file_get_contents("$package/{$marker[1]}"));
            $found = false;
            for ($k = 0; $k + count($block) <= count($source) && !$found; $k++) {
                $found = array_slice($source, $k, count($block)) === $block;
            }
            $this->assertTrue($found, "$where: the block is not a verbatim part of {$marker[1]}");
            $checked++;
            $i = $end;
        }
        $this->assertSame(6, $checked, 'the README has six php blocks');
    }

    public function testTheOverviewSample(): void
    {
        [$status, $out, $err] = self::runExample('overview.php', ['REDLOCK_STORE' => self::$store]);
        $this->assertSame(0, $status, implode("\n", array_merge($out, $err)));
        $this->assertCount(4, $out, implode("\n", $out));
        $this->assertSame('total 21', $out[0]);
        // The first fencing lock of these nodes: token 1.
        $this->assertSame('fenced write accepted with token 1', $out[1]);
        $this->assertSame('phpredis: locked orders:42 on 5 nodes', $out[2]);
        $this->assertMatchesRegularExpression('/^phpredis: released on [345] nodes$/', $out[3]);

        // The listener logged every outcome of the stream client, and none threw.
        $kinds = array_map(static fn (string $line): string => explode(' ', $line, 3)[0] . ' ' . explode(' ', $line, 3)[1], $err);
        $this->assertSame([
            'acquired orders:42', 'released orders:42',                          // synchronized()
            'acquired orders:42', 'extended orders:42', 'released orders:42',    // by hand
            'acquired orders:42', 'released orders:42',                          // keep-alive, time limit
            'acquired report:nightly', 'released report:nightly',                // tryAcquire()
            'acquired orders:42',                                                // waitMs
            'inspected orders:42', 'inspected orders:42',                        // isLocked(), isOwned()
            'released orders:42',
        ], $kinds, implode("\n", $err));

        // Nothing is left locked; the fenced write is in the store.
        $this->assertSame([false, false, false, false, false], Nodes::values(self::BASE_PORT, 'orders:42'));
        $this->assertSame('{"order":42,"state":"paid"}', Nodes::redis(self::STORE_PORT, 0)->get('orders:42:state'));
    }

    public function testTheEventsAndTracingSamples(): void
    {
        [$status, $out, $err] = self::runExample('events.php');
        $this->assertSame(0, $status, implode("\n", array_merge($out, $err)));
        $this->assertSame([], $err, 'a listener failed');
        $this->assertSame([
            // The metrics listener: one timing per event, by kind.
            'metric redlock.acquired 1',
            'metric redlock.inspected 3',
            'metric redlock.released 1',
            'metric redlock.retry 2',
            'metric redlock.not_acquired 1',
            'warnings 0',
            // The tracing listener: one span per outcome, none for retries, on the epoch clock.
            'span redlock.acquire acquired orders:42 attempt 1 timed',
            'span redlock.inspect inspected orders:42 attempt 1 timed',
            'span redlock.inspect inspected orders:42 attempt 1 timed',
            'span redlock.inspect inspected orders:42 attempt 1 timed',
            'span redlock.release released orders:42 attempt 1 timed',
            'span redlock.acquire not_acquired orders:42 attempt 3 reason conflict timed',
        ], $out);
    }

    public function testTheSymfonySampleWorksHoldingTheLock(): void
    {
        [$status, $out, $err] = self::runExample('symfony.php');
        $this->assertSame(0, $status, implode("\n", array_merge($out, $err)));
        $this->assertSame(['working, lock held: yes', 'afterwards, lock held: no'], $out);
        $this->assertSame([false, false, false, false, false], Nodes::values(self::BASE_PORT, 'orders:42'));
    }

    public function testTheSymfonySampleSkipsTheWorkWhenTheLockIsHeld(): void
    {
        $holder = Redlock::create(self::$urls);
        $lock = $holder->acquire('orders:42', 30_000);
        try {
            [$status, $out, $err] = self::runExample('symfony.php');
            $this->assertSame(0, $status, implode("\n", array_merge($out, $err)));
            $this->assertSame(['afterwards, lock held: no'], $out);
            $this->assertTrue($lock->isOwned(), 'the sample took or released the holder\'s lock');
        } finally {
            $lock->release();
            $holder->close();
        }
    }

    /**
     * Runs examples/`$example` with the nodes' URLs; returns its status, stdout and
     * stderr lines.
     *
     * @param array<string, string> $env
     * @return array{int, list<string>, list<string>}
     */
    private static function runExample(string $example, array $env = []): array
    {
        $env = ['REDLOCK_URLS' => implode(',', self::$urls)] + $env + getenv();
        $process = proc_open(
            [PHP_BINARY, dirname(__DIR__, 2) . "/examples/$example"],
            [['file', '/dev/null', 'r'], ['pipe', 'w'], ['pipe', 'w']],
            $pipes,
            null,
            $env,
        );
        self::assertIsResource($process, "could not run $example");
        // The samples write little: reading stdout, then stderr, cannot fill a pipe.
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        $status = proc_close($process);
        $lines = static fn (string $text): array => $text === '' ? [] : explode("\n", rtrim($text, "\n"));
        return [$status, $lines($out), $lines($err)];
    }
}
