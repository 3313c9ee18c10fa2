<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Ffi\Native;

/**
 * The PHP-FPM path: under a SAPI other than the CLI with `ffi.enable=preload`, PHP
 * refuses FFI::cdef and allows FFI only from preloaded code. php-cgi stands in for
 * PHP-FPM (same rules, no server to run): the package preloaded by preload.php finds
 * the library under the scope `redlock`, loaded either by `ffi.preload` (the header
 * from bin/ffi-header) or by preload.php's own FFI::load.
 */
final class PreloadTest extends TestCase
{
    private static function phpCgi(): string
    {
        foreach (explode(PATH_SEPARATOR, (string) getenv('PATH')) as $dir) {
            if (is_executable("$dir/php-cgi")) {
                return "$dir/php-cgi";
            }
        }
        self::fail('php-cgi is missing (Debian package php-cgi; build.sh installs it)');
    }

    /**
     * @param list<string> $command
     * @param array<string, string> $env
     * @return array<string, mixed>
     */
    private static function probe(array $command, array $env = []): array
    {
        $process = proc_open($command, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env + ['PATH' => (string) getenv('PATH')]);
        $stdout = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        $status = proc_close($process);
        $lines = array_values(array_filter(explode("\n", trim($stdout)), static fn (string $l): bool => str_starts_with($l, '{')));
        self::assertSame(0, $status, "probe failed: $stdout $stderr");
        self::assertNotEmpty($lines, "no result from the probe: $stdout $stderr");
        return json_decode(end($lines), true, 512, JSON_THROW_ON_ERROR);
    }

    private static function package(): string
    {
        return dirname(__DIR__);
    }

    public function testWithoutPreloadingANonCliSapiGetsAClearException(): void
    {
        $result = self::probe([self::phpCgi(), '-q', '-d', 'ffi.enable=preload', self::package() . '/tests/fixtures/probe.php']);
        $this->assertSame('cgi-fcgi', $result['sapi']);
        $this->assertFalse($result['cdef_allowed'], 'php-cgi with ffi.enable=preload allows FFI::cdef: the test proves nothing');
        $this->assertSame('Redlock\Exception\FfiUnavailableException', $result['error'] ?? null);
        $this->assertStringContainsString('opcache.preload', $result['message']);
    }

    public function testFfiPreloadHeaderAndOpcachePreloadedClasses(): void
    {
        $header = tempnam(sys_get_temp_dir(), 'redlock-ffi-');
        $this->assertIsString($header);
        try {
            $command = escapeshellarg(PHP_BINARY) . ' ' . escapeshellarg(self::package() . '/bin/ffi-header');
            exec($command . ' > ' . escapeshellarg($header), result_code: $status);
            $this->assertSame(0, $status);
            $this->assertStringStartsWith("#define FFI_SCOPE \"redlock\"\n#define FFI_LIB \"/", (string) file_get_contents($header));
            $result = self::probe([
                self::phpCgi(), '-q',
                '-d', 'ffi.enable=preload',
                '-d', "ffi.preload=$header",
                '-d', 'opcache.enable=1',
                '-d', 'opcache.preload=' . self::package() . '/preload.php',
                // As an FPM master running as root must.
                '-d', 'opcache.preload_user=' . self::user(),
                self::package() . '/tests/fixtures/probe.php',
            ]);
            $this->assertSame(['origin' => "FFI scope 'redlock'", 'quorum' => 3, 'sapi' => 'cgi-fcgi', 'cdef_allowed' => false], $result);
        } finally {
            @unlink($header);
        }
    }

    public function testOpcachePreloadLoadingTheLibraryItself(): void
    {
        // FFI::load is refused with opcache.preload_user, which root needs: run as
        // nobody from a copy it can read.
        $copy = sys_get_temp_dir() . '/redlock-preload-' . getmypid();
        $this->copyTree(self::package(), $copy, ['src', 'vendor', 'tests/fixtures', 'preload.php']);
        copy(Native::defaultLibrary(), "$copy/libredlock.so");
        copy(Native::defaultHeader(), "$copy/redlock_php.h");
        try {
            $command = [
                self::phpCgi(),
                '-q',
                '-d',
                'ffi.enable=preload',
                '-d',
                'opcache.enable=1',
                '-d',
                "opcache.preload=$copy/preload.php",
                "$copy/tests/fixtures/probe.php",
            ];
            if (function_exists('posix_geteuid') && posix_geteuid() === 0) {
                $command = array_merge(['runuser', '-u', 'nobody', '--'], $command);
            }
            $result = self::probe($command, [
                'REDLOCK_LIBRARY' => "$copy/libredlock.so",
                'REDLOCK_HEADER' => "$copy/redlock_php.h",
                'REDLOCK_PRELOAD_DIR' => $copy,
            ]);
            $this->assertSame(['origin' => "FFI scope 'redlock'", 'quorum' => 3, 'sapi' => 'cgi-fcgi', 'cdef_allowed' => false], $result);
        } finally {
            exec('rm -rf ' . escapeshellarg($copy));
        }
    }

    private static function user(): string
    {
        if (function_exists('posix_getpwuid') && function_exists('posix_geteuid')) {
            $entry = posix_getpwuid(posix_geteuid());
            if (is_array($entry)) {
                return $entry['name'];
            }
        }
        return (string) (getenv('USER') ?: 'root');
    }

    /** @param list<string> $entries */
    private function copyTree(string $from, string $to, array $entries): void
    {
        foreach ($entries as $entry) {
            $source = "$from/$entry";
            @mkdir(dirname("$to/$entry"), 0755, true);
            exec('cp -r ' . escapeshellarg($source) . ' ' . escapeshellarg("$to/$entry"), result_code: $status);
            $this->assertSame(0, $status, "copying $entry");
        }
        exec('chmod -R a+rX ' . escapeshellarg($to) . ' && chmod a+rwx ' . escapeshellarg($to));
    }
}
