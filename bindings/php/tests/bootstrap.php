<?php

declare(strict_types=1);

// Composer's autoloader (build.sh runs `composer dump-autoload`); every notice and
// warning is an error in the tests.
error_reporting(E_ALL);
require dirname(__DIR__) . '/vendor/autoload.php';
