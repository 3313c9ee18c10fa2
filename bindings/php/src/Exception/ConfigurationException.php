<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * A configuration the core does not accept. `$codeName` names the rule it breaks
 * (`ttl_zero`, `no_nodes`, `node_timeout_too_large`, ...).
 */
final class ConfigurationException extends \InvalidArgumentException implements RedlockException
{
    public function __construct(
        string $message,
        public readonly string $codeName,
        int $result = 0,
    ) {
        parent::__construct($message, $result);
    }
}
