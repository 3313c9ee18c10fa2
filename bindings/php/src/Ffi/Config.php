<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;
use Redlock\Exception\ConfigurationException;
use Redlock\Exception\InvalidArgumentException;

/**
 * A configuration the core checked (`redlock_config*`). Built from the number of nodes,
 * the TTL and optional settings; every rule is the core's.
 */
final class Config
{
    /** Setting name => [builder function, PHP type]. Times are in microseconds. */
    private const SETTINGS = [
        'drift_factor' => ['redlock_config_builder_set_drift_factor', 'float'],
        'drift_fixed_us' => ['redlock_config_builder_set_drift_fixed_us', 'int'],
        'node_timeout_us' => ['redlock_config_builder_set_node_timeout_us', 'int'],
        'min_validity_us' => ['redlock_config_builder_set_min_validity_us', 'int'],
        'attempts' => ['redlock_config_builder_set_attempts', 'int'],
        'retry_delay_us' => ['redlock_config_builder_set_retry_delay_us', 'int'],
        'retry_jitter_us' => ['redlock_config_builder_set_retry_jitter_us', 'int'],
        'token_bytes' => ['redlock_config_builder_set_token_bytes', 'int'],
        'max_extensions' => ['redlock_config_builder_set_max_extensions', 'int'],
        'key_prefix' => ['redlock_config_builder_set_key_prefix', 'string'],
        'fencing' => ['redlock_config_builder_set_fencing', 'bool'],
    ];

    private function __construct(public readonly Native $native, public readonly CData $handle)
    {
    }

    /**
     * @param array<string, int|float|string|bool|null> $settings keys of SETTINGS; null keeps the default
     */
    public static function build(Native $native, int $nodes, int $ttlMs, array $settings = []): self
    {
        if ($nodes < 0) {
            throw new ConfigurationException("the number of nodes must be at least 1, got $nodes", 'no_nodes');
        }
        if ($ttlMs < 0) {
            $largest = (int) $native->ffi->redlock_max_ttl_ms();
            throw new ConfigurationException("configuration: ttlMs must be between 1 and $largest ms, got $ttlMs (ttl_zero)", 'ttl_zero');
        }
        $ffi = $native->ffi;
        $builder = $ffi->new('redlock_config_builder*');
        $native->check($ffi->redlock_config_builder_new($nodes, $ttlMs, FFI::addr($builder)), 'configuration');
        try {
            foreach ($settings as $name => $value) {
                if ($value === null) {
                    continue;
                }
                [$function, $type] = self::SETTINGS[$name]
                    ?? throw new InvalidArgumentException("unknown setting '$name'");
                if ($type === 'bool') {
                    if (!is_bool($value)) {
                        throw new InvalidArgumentException("setting '$name' must be true or false");
                    }
                    $rc = $ffi->$function($builder, $value);
                } elseif ($type === 'string') {
                    $text = (string) $value;
                    $rc = $ffi->$function($builder, $text, strlen($text));
                } elseif ($type === 'float') {
                    if (!is_int($value) && !is_float($value)) {
                        throw new InvalidArgumentException("setting '$name' must be a number");
                    }
                    $rc = $ffi->$function($builder, (float) $value);
                } else {
                    if (!is_int($value) || $value < 0) {
                        throw new InvalidArgumentException("setting '$name' must be a non-negative integer");
                    }
                    if ($name === 'attempts' || $name === 'max_extensions') {
                        $value = min($value, 0xFFFFFFFF);
                    }
                    $rc = $ffi->$function($builder, $value);
                }
                $native->check($rc, "setting '$name'");
            }
            $config = $ffi->new('redlock_config*');
            $rc = $ffi->redlock_config_builder_build($builder, FFI::addr($config));
            $name = $rc === Constants::OK ? null : $native->resultName($rc);
            if ($name === 'ttl_zero' || $name === 'ttl_too_large') {
                // The rule and the range it allows, as for a TTL per call.
                $largest = (int) $ffi->redlock_max_ttl_ms();
                throw new ConfigurationException(
                    "configuration: ttlMs must be between 1 and $largest ms, got $ttlMs ($name: {$native->resultMessage($rc)})",
                    $name,
                    $rc,
                );
            }
            $native->check($rc, 'configuration');
        } finally {
            $ffi->redlock_config_builder_free($builder);
        }
        return new self($native, $config);
    }

    public function nodes(): int
    {
        return $this->native->ffi->redlock_config_nodes($this->handle);
    }

    public function quorum(): int
    {
        return $this->native->ffi->redlock_config_quorum($this->handle);
    }

    public function ttlMs(): int
    {
        return $this->native->ffi->redlock_config_ttl_ms($this->handle);
    }

    public function nodeTimeoutUs(): int
    {
        return $this->native->ffi->redlock_config_node_timeout_us($this->handle);
    }

    public function attempts(): int
    {
        return $this->native->ffi->redlock_config_attempts($this->handle);
    }

    /** Whether acquisitions issue fencing tokens. */
    public function fencing(): bool
    {
        return $this->native->ffi->redlock_config_fencing($this->handle);
    }

    public function driftUs(): int
    {
        return $this->native->ffi->redlock_config_drift_us($this->handle);
    }

    public function __destruct()
    {
        $this->native->free('redlock_config_free', $this->handle);
    }
}
