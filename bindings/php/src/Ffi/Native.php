<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;
use Redlock\Exception\ConfigurationException;
use Redlock\Exception\CoreException;
use Redlock\Exception\FfiUnavailableException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\LibraryNotFoundException;

/**
 * `libredlock` loaded through PHP's FFI, and the few helpers every handle class uses.
 *
 * Where the library comes from, first match wins: a path given to {@see load()}; a
 * scope named `redlock` preloaded by `preload.php` (PHP-FPM: `opcache.preload`); the
 * `REDLOCK_LIBRARY` environment variable; `lib/libredlock.so` inside this package (what
 * `build.sh lib` puts there); the project's build output `target/release/libredlock.so`.
 * The header is the project's preprocessor-free `ffi/include/redlock_php.h` (or
 * `lib/redlock_php.h`, or `REDLOCK_HEADER`), declared with `const char *` in place of
 * `const uint8_t *` (the same ABI) so PHP strings pass without copies.
 *
 * One instance per library; handles keep a reference to the instance that made them.
 */
final class Native
{
    /** The FFI scope `preload.php` declares. */
    public const SCOPE = 'redlock';

    /** @var array<string, self> */
    private static array $instances = [];
    private static ?self $default = null;

    /** Scratch out-parameters, reused by every call (PHP runs one call at a time). */
    public readonly CData $u32;
    public readonly CData $u32b;
    public readonly CData $u64;
    public readonly CData $u64b;
    public readonly CData $i64;
    public readonly CData $size;
    public readonly CData $size2;
    public readonly CData $flag;
    public readonly CData $bytes;
    public readonly CData $bytesLen;
    private readonly CData $message;

    /** @var \FFI The loaded library (declared \FFI: its functions are called dynamically). */
    public readonly \FFI $ffi;

    private function __construct(\FFI $ffi, public readonly string $origin)
    {
        $this->ffi = $ffi;
        $this->u32 = $ffi->new('uint32_t');
        $this->u32b = $ffi->new('uint32_t');
        $this->u64 = $ffi->new('uint64_t');
        $this->u64b = $ffi->new('uint64_t');
        $this->i64 = $ffi->new('int64_t');
        $this->size = $ffi->new('size_t');
        $this->size2 = $ffi->new('size_t');
        $this->flag = $ffi->new('bool');
        $this->bytes = $ffi->new('const char*');
        $this->bytesLen = $ffi->new('size_t');
        $this->message = $ffi->new('uint8_t[256]');
        $version = $ffi->redlock_version();
        if (!is_string($version) || $version === '') {
            throw new LibraryNotFoundException("$origin does not look like libredlock (no version)");
        }
    }

    /**
     * The library: the preloaded scope if there is one, else loaded from the default
     * path. Loaded once per process.
     */
    public static function get(): self
    {
        return self::$default ??= self::preloaded() ?? self::load();
    }

    /**
     * The library loaded from `$library` (default: see the class documentation) with
     * the PHP header at `$header`.
     *
     * @throws FfiUnavailableException FFI is not loaded or not enabled here
     * @throws LibraryNotFoundException the library or the header is missing or unusable
     */
    public static function load(?string $library = null, ?string $header = null): self
    {
        self::assertFfiUsable(false);
        $library ??= self::defaultLibrary();
        $header ??= self::defaultHeader();
        $key = $library . "\0" . $header;
        if (isset(self::$instances[$key])) {
            return self::$instances[$key];
        }
        if (!is_file($library)) {
            throw new LibraryNotFoundException(
                "libredlock not found at $library; build it with bindings/php/build.sh lib "
                . '(cargo build -p redlock-ffi --release) or set REDLOCK_LIBRARY to its path'
            );
        }
        try {
            $ffi = FFI::cdef(self::declarations($header), $library);
        } catch (\FFI\Exception $e) {
            if (str_contains($e->getMessage(), 'ffi.enable')) {
                throw new FfiUnavailableException(self::disabledHelp($e->getMessage()), 0, $e);
            }
            throw new LibraryNotFoundException("could not load $library: {$e->getMessage()}", 0, $e);
        }
        return self::$instances[$key] = new self($ffi, $library);
    }

    /**
     * The library preloaded under `$scope` by `preload.php`, or null when nothing was
     * preloaded under that name.
     */
    public static function preloaded(string $scope = self::SCOPE): ?self
    {
        if (!extension_loaded('ffi')) {
            return null;
        }
        $key = "scope\0" . $scope;
        if (isset(self::$instances[$key])) {
            return self::$instances[$key];
        }
        try {
            $ffi = FFI::scope($scope);
        } catch (\FFI\Exception) {
            return null;
        }
        return self::$instances[$key] = new self($ffi, "FFI scope '$scope'");
    }

    /**
     * Preloads the library under the scope `redlock` (call it from an
     * `opcache.preload` script, see preload.php): writes the declarations with their
     * `FFI_SCOPE` / `FFI_LIB` lines to a file in `$directory` (default: the system's
     * temporary directory) and `FFI::load()`s it. Requests then find it with
     * preloaded(), which get() tries first, even where `ffi.enable=preload` forbids
     * FFI::cdef (PHP-FPM).
     */
    public static function preload(?string $library = null, ?string $header = null, ?string $directory = null): void
    {
        self::assertFfiUsable(true);
        $path = $library ?? self::defaultLibrary();
        $resolved = realpath($path);
        if ($resolved === false || !is_file($resolved)) {
            throw new LibraryNotFoundException("libredlock not found at $path; build it with bindings/php/build.sh lib or set REDLOCK_LIBRARY");
        }
        $text = self::declarations($header, $resolved);
        $directory ??= sys_get_temp_dir();
        $file = rtrim($directory, '/') . '/redlock-php-' . sha1($text) . '.h';
        if (!is_file($file)) {
            $temporary = $file . '.' . getmypid() . '.tmp';
            if (file_put_contents($temporary, $text) === false || !rename($temporary, $file)) {
                throw new LibraryNotFoundException("could not write the preload header $file");
            }
        }
        try {
            $loaded = FFI::load($file);
        } catch (\FFI\Exception $e) {
            throw new LibraryNotFoundException("could not preload $resolved: {$e->getMessage()}", 0, $e);
        }
        if ($loaded === null) {
            throw new LibraryNotFoundException("could not preload $resolved (FFI::load failed on $file)");
        }
    }

    /**
     * The header text as this package declares it to FFI: the project's PHP header with
     * `const char *` for `const uint8_t *`, optionally preceded by the `FFI_SCOPE` and
     * `FFI_LIB` lines `FFI::load()` reads when preloading.
     */
    public static function declarations(?string $header = null, ?string $scopeLibrary = null): string
    {
        $header ??= self::defaultHeader();
        if (!is_file($header)) {
            throw new LibraryNotFoundException(
                "the PHP header redlock_php.h was not found at $header; set REDLOCK_HEADER to its path"
            );
        }
        $text = (string) file_get_contents($header);
        $text = str_replace('const uint8_t *', 'const char *', $text);
        if ($scopeLibrary !== null) {
            $text = sprintf("#define FFI_SCOPE \"%s\"\n#define FFI_LIB \"%s\"\n", self::SCOPE, addslashes($scopeLibrary)) . $text;
        }
        return $text;
    }

    public static function defaultLibrary(): string
    {
        $env = getenv('REDLOCK_LIBRARY');
        if (is_string($env) && $env !== '') {
            return $env;
        }
        $bundled = dirname(__DIR__, 2) . '/lib/libredlock.so';
        if (is_file($bundled)) {
            return $bundled;
        }
        $target = getenv('CARGO_TARGET_DIR');
        $target = is_string($target) && $target !== '' ? $target : dirname(__DIR__, 4) . '/target';
        return $target . '/release/libredlock.so';
    }

    public static function defaultHeader(): string
    {
        $env = getenv('REDLOCK_HEADER');
        if (is_string($env) && $env !== '') {
            return $env;
        }
        $bundled = dirname(__DIR__, 2) . '/lib/redlock_php.h';
        if (is_file($bundled)) {
            return $bundled;
        }
        return dirname(__DIR__, 4) . '/ffi/include/redlock_php.h';
    }

    /**
     * Throws when FFI cannot be used from this script: not loaded, or `ffi.enable`
     * off (or `preload` outside the CLI, where only preloaded code may use FFI).
     */
    public static function assertFfiUsable(bool $preloadedScope): void
    {
        if (!extension_loaded('ffi')) {
            throw new FfiUnavailableException(
                'the FFI extension is not loaded: install it (Debian: php-cli ships it) and enable it with extension=ffi'
            );
        }
        $setting = strtolower((string) ini_get('ffi.enable'));
        if (in_array($setting, ['0', '', 'off', 'false', 'no'], true)) {
            throw new FfiUnavailableException(self::disabledHelp('ffi.enable is off'));
        }
        if ($setting === 'preload' && PHP_SAPI !== 'cli' && !$preloadedScope) {
            throw new FfiUnavailableException(self::disabledHelp('ffi.enable=preload outside the CLI'));
        }
    }

    private static function disabledHelp(string $what): string
    {
        return "PHP's FFI is not usable here ($what): set ffi.enable=true, or keep ffi.enable=preload "
            . 'and preload the library with opcache.preload=.../bindings/php/preload.php (see the README)';
    }

    // ---- results ------------------------------------------------------------------

    /**
     * How long a connection may take to open (TCP, TLS, AUTH, SELECT), and a subscriber
     * connection to confirm a subscription, when nothing else bounds it (ms; the core's,
     * the same in every binding).
     */
    public function connectTimeoutDefaultMs(): int
    {
        return (int) $this->ffi->redlock_connect_timeout_default_ms();
    }

    /**
     * How long one Redis Sentinel may take to connect and answer
     * `SENTINEL get-master-addr-by-name` when the user sets no bound (ms; the core's, the
     * same in every binding). A Sentinel past it is skipped, and the next one is asked.
     */
    public function sentinelQueryTimeoutDefaultMs(): int
    {
        return (int) $this->ffi->redlock_sentinel_query_timeout_default_ms();
    }

    /**
     * The connect timeout of a node reached through `$sentinels` Sentinels (ms): each may
     * use its whole `$queryMs` in turn, then the master's connection has `$connectMs` (the
     * core's composition, the same in every binding). Saturating: a sum past PHP_INT_MAX
     * is PHP_INT_MAX.
     *
     * @throws InvalidArgumentException a negative argument
     */
    public function sentinelConnectTimeoutMs(int $sentinels, int $queryMs, int $connectMs): int
    {
        if ($sentinels < 0 || $queryMs < 0 || $connectMs < 0) {
            throw new InvalidArgumentException(
                "Sentinels and timeouts cannot be negative ($sentinels, $queryMs ms, $connectMs ms)",
            );
        }
        $ms = (int) $this->ffi->redlock_sentinel_connect_timeout_ms($sentinels, $queryMs, $connectMs);
        // A uint64_t past PHP_INT_MAX comes back negative: it saturated beyond PHP's range.
        return $ms < 0 ? PHP_INT_MAX : $ms;
    }

    public function resultName(int $result): string
    {
        return (string) $this->ffi->redlock_result_name($result);
    }

    public function resultMessage(int $result): string
    {
        $rc = $this->ffi->redlock_result_message($result, $this->message, 256, FFI::addr($this->size));
        if ($rc !== 9000) {
            return $this->resultName($result);
        }
        return FFI::string($this->message, $this->size->cdata);
    }

    /**
     * Frees a handle with `$free` and sets it to NULL, so that a later call with it is
     * the library's NULL-argument error (or its documented NULL answer), never a use of
     * freed memory. That happens when PHP's garbage collector destroys a cycle holding a
     * client: it runs the destructors of the cycle's objects in any order, so the
     * client's own destructor (which releases its locks) can come after its links' or
     * its configuration's.
     */
    public function free(string $free, CData $handle): void
    {
        if (FFI::isNull($handle)) {
            return;
        }
        $this->ffi->{$free}($handle);
        FFI::memset(FFI::addr($handle), 0, FFI::sizeof($handle));
    }

    /**
     * Throws the exception that fits `$result` unless it is `REDLOCK_OK`.
     */
    public function check(int $result, string $context): void
    {
        if ($result !== 9000) {
            throw $this->error($result, $context);
        }
    }

    public function error(int $result, string $context): \Throwable
    {
        $name = $this->resultName($result);
        $message = "$context: {$this->resultMessage($result)} ($name)";
        if ($result >= 9200 && $result < 9300) {
            return new ConfigurationException($message, $name, $result);
        }
        // 9113: reserved_resource, a resource named after another lock's auxiliary key.
        $invalid = ($result >= 9102 && $result <= 9107) || ($result >= 9109 && $result <= 9111) || $result === 9113;
        if ($invalid || $result === 9004 || $result === 9005 || $result === 9001) {
            return new InvalidArgumentException($message, $name, $result);
        }
        return new CoreException($message, $name, $result);
    }

    // ---- bytes ----------------------------------------------------------------------

    /** The bytes at the scratch pointer (`$bytes`, `$bytesLen`), copied into PHP. */
    public function takeBytes(): string
    {
        $length = $this->bytesLen->cdata;
        return $length === 0 ? '' : FFI::string($this->bytes, $length);
    }

    /**
     * C arrays for a list of resources: `const char *const *` pointers and `size_t`
     * lengths. The third element keeps the buffers alive; hold it during the call.
     *
     * @param list<string> $resources
     * @return array{CData, CData, list<CData>}
     */
    public function resourceArrays(array $resources): array
    {
        $count = max(1, count($resources));
        $pointers = $this->ffi->new("const char*[$count]");
        $lengths = $this->ffi->new("size_t[$count]");
        $buffers = [];
        foreach ($resources as $i => $resource) {
            $length = strlen($resource);
            $buffer = $this->ffi->new('char[' . max(1, $length) . ']');
            FFI::memcpy($buffer, $resource, $length);
            $buffers[] = $buffer;
            $pointers[$i] = $this->ffi->cast('const char*', $buffer);
            $lengths[$i] = $length;
        }
        return [$pointers, $lengths, $buffers];
    }
}
