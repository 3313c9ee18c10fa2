<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Client;
use Redlock\Ffi\Config;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Link;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Outcome;

/**
 * The FFI wrapper of the core's Link, about its connect timeout: set and read back,
 * refusals as the binding's exceptions, and a drive by hand through an attempt the
 * link gives up. The policy itself is tested in the core (core/tests/lifecycle.rs).
 */
final class LinkTest extends TestCase
{
    private const T0 = 1_000_000;

    public function testANewLinkHasTheCoresConnectTimeoutAndTakesAnother(): void
    {
        $native = Native::get();
        $link = Link::create($native);
        $this->assertSame($native->connectTimeoutDefaultMs(), $link->connectTimeoutMs());
        $this->assertSame(2000, $link->connectTimeoutMs());
        $link->setConnectTimeout(750);
        $this->assertSame(750, $link->connectTimeoutMs());
        $link->setConnectTimeout(0);
        $this->assertSame(1, $link->connectTimeoutMs(), '0 is taken as 1 ms');
        $link->setConnectTimeout(Link::CONNECT_TIMEOUT_MAX_MS);
        $this->assertSame(Link::CONNECT_TIMEOUT_MAX_MS, $link->connectTimeoutMs());
    }

    public function testBadConnectTimeoutsAndAFreedLinkAreRefused(): void
    {
        $native = Native::get();
        $link = Link::create($native);
        $link->setConnectTimeout(300);
        foreach ([-1, PHP_INT_MIN, Link::CONNECT_TIMEOUT_MAX_MS + 1, PHP_INT_MAX] as $ms) {
            try {
                $link->setConnectTimeout($ms);
                $this->fail("a connect timeout of $ms ms was accepted");
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString("got $ms", $e->getMessage());
            }
        }
        $this->assertSame(300, $link->connectTimeoutMs(), 'unchanged');

        // What a garbage-collected cycle can leave: the handle freed (NULL).
        $native->free('redlock_link_free', $link->handle);
        foreach ([static fn () => $link->setConnectTimeout(100), static fn () => $link->connectTimeoutMs()] as $i => $call) {
            try {
                $call();
                $this->fail("call $i on a freed link succeeded");
            } catch (InvalidArgumentException $e) {
                $this->assertSame('null_parameter', $e->codeName, "call $i");
                $this->assertStringStartsWith('connect timeout: ', $e->getMessage());
            }
        }
    }

    /**
     * An attempt not open within the link's connect timeout: at that instant (not
     * before) the link says Close, and the command waiting on it fails with `timeout`;
     * the acquisition's node cause is `timeout`. A closed report for the attempt
     * afterwards changes nothing.
     */
    public function testAnAttemptNotOpenWithinTheConnectTimeoutIsGivenUpWithClose(): void
    {
        $native = Native::get();
        $config = Config::build($native, 1, 30_000, ['node_timeout_us' => 5_000_000, 'attempts' => 1]);
        $op = Client::create($config, str_repeat("\7", 32))->acquire(['r'], null, self::T0);
        $link = Link::create($native);
        $link->setConnectTimeout(150);
        $this->assertNull(self::drain($op, $link, self::T0));
        $this->assertSame([Constants::LINK_OUTPUT_CONNECT], self::outputs($link));
        $this->assertSame(self::T0 + 150_000, $link->pollTimeout(), 'due at the connect timeout');

        $link->handleTimeout(self::T0 + 149_999);
        $this->assertSame([], self::outputs($link), 'not before');
        $link->handleTimeout(self::T0 + 150_000);
        $this->assertSame(Constants::LINK_OUTPUT_CLOSE, $link->poll(), 'given up');
        $outcome = null;
        while (($kind = $link->poll()) === Constants::LINK_OUTPUT_DELIVER) {
            $this->assertSame(1, $link->deliveryTag());
            $this->assertSame(Constants::OK, $op->handleDelivery($link, self::T0 + 150_000));
            $outcome = self::drain($op, $link, self::T0 + 150_000) ?? $outcome;
        }
        $this->assertSame(Constants::LINK_OUTPUT_NONE, $kind);
        $this->assertNotNull($outcome);
        $this->assertSame(Constants::OUTCOME_NOT_ACQUIRED, $outcome->kind);
        $this->assertSame(['timeout'], $outcome->nodeCauses());
        $this->assertStringContainsString('timeout: no connection within 150 ms; given up', $outcome->nodes()[0][1]);
        $this->assertFalse($link->isOpen());

        $link->handleClosed(Constants::LINK_CAUSE_REFUSED, 'late', self::T0 + 200_000);
        $this->assertSame([], self::outputs($link), 'nothing more for the attempt given up');
    }

    /** The operation's outputs until Wait or the outcome, each send to `$link` tagged 1. */
    private static function drain(Operation $op, Link $link, int $nowUs): ?Outcome
    {
        while (($kind = $op->poll()) !== Constants::OUTPUT_NONE) {
            if ($kind === Constants::OUTPUT_SEND) {
                $link->submit(1, $op, $nowUs);
            } elseif ($kind === Constants::OUTPUT_OUTCOME) {
                return $op->takeOutcome();
            } elseif ($kind === Constants::OUTPUT_WAIT) {
                return null;
            }
        }
        return null;
    }

    /** @return list<int> the link's outputs until none is left */
    private static function outputs(Link $link): array
    {
        $out = [];
        while (($kind = $link->poll()) !== Constants::LINK_OUTPUT_NONE) {
            $out[] = $kind;
        }
        return $out;
    }
}
