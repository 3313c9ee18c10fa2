<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * A configuration the core does not accept (error class `invalid_argument`, like its
 * parent). `$codeName` names the rule it breaks
 * (`ttl_zero`, `no_nodes`, `node_timeout_too_large`, ...).
 */
class ConfigurationException extends InvalidArgumentException
{
}
