<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;

/**
 * The PHP mirror of the C ABI's enumerations equals the loaded library's values.
 */
final class ConstantsTest extends TestCase
{
    public function testEveryConstantMatchesTheLibrary(): void
    {
        $ffi = Native::get()->ffi;
        $constants = (new \ReflectionClass(Constants::class))->getConstants();
        $checked = 0;
        foreach ($constants as $name => $value) {
            if (is_array($value)) {
                continue;
            }
            $this->assertSame($ffi->{"REDLOCK_$name"}, $value, "REDLOCK_$name");
            $checked++;
        }
        $this->assertGreaterThan(35, $checked);
    }
}
