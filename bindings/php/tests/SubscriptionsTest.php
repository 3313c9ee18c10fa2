<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\ConfigurationException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\UsedAfterCloseException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Subscriptions;

/**
 * The FFI wrapper of the core's Subscriptions (the subscriber connections' policy),
 * driven by hand: errors as the binding's exceptions, and a short drive through its
 * outputs. The policy itself is tested in the core (core/tests/subscriptions.rs).
 */
final class SubscriptionsTest extends TestCase
{
    private const CHANNEL = 'redlock:released:r';
    private const T0 = 1_000_000;

    public function testABadNodeCountIsAConfigurationError(): void
    {
        foreach ([0 => 'no_nodes', 256 => 'too_many_nodes'] as $nodes => $code) {
            try {
                Subscriptions::create(Native::get(), $nodes, 150);
                $this->fail("accepted $nodes nodes");
            } catch (ConfigurationException $e) {
                $this->assertSame($code, $e->codeName);
            }
        }
        $this->expectException(InvalidArgumentException::class);
        Subscriptions::create(Native::get(), -1, 150);
    }

    public function testAnUnknownNodeIsRefused(): void
    {
        $s = Subscriptions::create(Native::get(), 2, 150);
        foreach (
            [
                static fn () => $s->handleOpened(2, self::T0),
                static fn () => $s->handleLost(7, self::T0),
                static fn () => $s->handleRefused(-1, self::T0),
                static fn () => $s->handleConfirmed(2, self::CHANNEL, self::T0),
            ] as $i => $call
        ) {
            try {
                $call();
                $this->fail("call $i accepted an unknown node");
            } catch (InvalidArgumentException $e) {
                $this->assertSame('unknown_node', $e->codeName, "call $i");
            }
        }
        $this->assertFalse($s->isOpen(2));
        $this->assertFalse($s->isOpen(-1));
    }

    public function testADriveFromWantToClose(): void
    {
        $ffi = Native::get()->ffi;
        $lingerUs = 1000 * $ffi->redlock_notice_channel_linger_ms();
        $s = Subscriptions::create(Native::get(), 2, 150);
        $this->assertNull($s->pollTimeout(), 'nothing wanted, nothing due');

        // Wanted: both nodes' connections open, and a connection that does not open in
        // time (150 ms) is due then.
        $s->want(self::CHANNEL, self::T0);
        $this->assertSame([[Constants::SUBSCRIBER_OUTPUT_OPEN, 0, null], [Constants::SUBSCRIBER_OUTPUT_OPEN, 1, null]], self::drain($s));
        $this->assertSame(self::T0 + 150_000, $s->pollTimeout());

        // Opened: the channel is subscribed there; its first confirmation counts, a
        // repeated one does not.
        $s->handleOpened(0, self::T0 + 1_000);
        $this->assertTrue($s->isOpen(0));
        $this->assertSame([[Constants::SUBSCRIBER_OUTPUT_SUBSCRIBE, 0, self::CHANNEL]], self::drain($s));
        $this->assertTrue($s->handleConfirmed(0, self::CHANNEL, self::T0 + 2_000));
        $this->assertFalse($s->handleConfirmed(0, self::CHANNEL, self::T0 + 3_000));
        $this->assertFalse($s->handleConfirmed(0, 'redlock:released:other', self::T0 + 3_000), 'never asked for');
        $s->handleOpened(1, self::T0 + 1_000);
        $this->assertSame([[Constants::SUBSCRIBER_OUTPUT_SUBSCRIBE, 1, self::CHANNEL]], self::drain($s));
        $this->assertTrue($s->handleConfirmed(1, self::CHANNEL, self::T0 + 2_000));
        $this->assertNull($s->pollTimeout(), 'open and confirmed: nothing due');

        // The last listener left: the channel lingers, then is unsubscribed, and the
        // connections close with nothing wanted or lingering.
        $left = self::T0 + 10_000;
        $this->assertTrue($s->unwant(self::CHANNEL, $left));
        $this->assertFalse($s->unwant(self::CHANNEL, $left), 'nobody listens any more');
        $this->assertSame([], self::drain($s));
        $this->assertSame(1, $s->channelCount());
        $this->assertSame($left + $lingerUs, $s->pollTimeout());
        $s->handleTimeout($left + $lingerUs - 1);
        $this->assertSame([], self::drain($s), 'still lingering');
        $s->handleTimeout($left + $lingerUs);
        $this->assertSame([
            [Constants::SUBSCRIBER_OUTPUT_UNSUBSCRIBE, 0, self::CHANNEL],
            [Constants::SUBSCRIBER_OUTPUT_UNSUBSCRIBE, 1, self::CHANNEL],
            [Constants::SUBSCRIBER_OUTPUT_CLOSE, 0, null],
            [Constants::SUBSCRIBER_OUTPUT_CLOSE, 1, null],
        ], self::drain($s));
        $this->assertSame(0, $s->channelCount());
        $this->assertFalse($s->isOpen(0));
    }

    public function testARefusalPausesTheNodeAndANewWaiterDoesNotCutThePauseShort(): void
    {
        $firstUs = 1000 * Native::get()->ffi->redlock_subscriber_reopen_first_ms();
        $s = Subscriptions::create(Native::get(), 1, 150);
        $s->want(self::CHANNEL, self::T0);
        $s->handleOpened(0, self::T0);
        self::drain($s);
        $s->handleRefused(0, self::T0 + 1_000);
        $this->assertSame([[Constants::SUBSCRIBER_OUTPUT_CLOSE, 0, null]], self::drain($s));
        $this->assertSame(self::T0 + 1_000 + $firstUs, $s->pollTimeout());
        $s->want('redlock:released:s', self::T0 + 2_000);
        $this->assertSame([], self::drain($s), 'the pause holds');
        $s->handleTimeout(self::T0 + 1_000 + $firstUs);
        $this->assertSame([[Constants::SUBSCRIBER_OUTPUT_OPEN, 0, null]], self::drain($s));
    }

    public function testItIsFreedOnceAndUnusableAfterClose(): void
    {
        $s = Subscriptions::create(Native::get(), 1, 150);
        $s->close();
        $s->close();
        $this->assertTrue($s->isClosed());
        $this->expectException(UsedAfterCloseException::class);
        $s->want(self::CHANNEL, self::T0);
    }

    /** @return list<array{int, int, ?string}> the outputs until none is left */
    private static function drain(Subscriptions $s): array
    {
        $out = [];
        while (($output = $s->poll())[0] !== Constants::SUBSCRIBER_OUTPUT_NONE) {
            $out[] = $output;
        }
        return $out;
    }
}
