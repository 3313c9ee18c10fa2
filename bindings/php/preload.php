<?php

// The opcache.preload script for PHP-FPM (and any SAPI where `ffi.enable=preload`
// allows FFI only from code preloaded at server start). With `ffi.enable=preload`, PHP
// lets only preloaded code call FFI, so this script preloads every class of the
// package; the library itself is loaded at start too, one of two ways:
//
//   ; 1. ffi.preload (works with opcache.preload_user, i.e. an FPM master running as root)
//   ffi.enable=preload
//   ffi.preload=/etc/php/redlock-ffi.h      ; php vendor/redlock/redlock/bin/ffi-header > /etc/php/redlock-ffi.h
//   opcache.enable=1
//   opcache.preload=/path/to/vendor/redlock/redlock/preload.php
//   opcache.preload_user=www-data
//
//   ; 2. without ffi.preload: this script FFI::load()s the library (PHP refuses
//   ; FFI::load together with opcache.preload_user, so only for a non-root master)
//
// Requests then find the library under the FFI scope `redlock` (Native::get() does).
// REDLOCK_LIBRARY / REDLOCK_HEADER choose the files as at run time; the declarations
// for FFI::load go to REDLOCK_PRELOAD_DIR (default: the temporary directory).

declare(strict_types=1);

$autoload = is_file(__DIR__ . '/vendor/autoload.php')
    ? __DIR__ . '/vendor/autoload.php'
    : dirname(__DIR__, 2) . '/autoload.php';
require $autoload;

// Every class of the package, so that all of its FFI calls come from preloaded code.
$source = __DIR__ . '/src';
$files = new RecursiveIteratorIterator(new RecursiveDirectoryIterator($source, FilesystemIterator::SKIP_DOTS));
foreach ($files as $file) {
    if ($file->getExtension() === 'php') {
        if (str_contains($file->getPathname(), '/Symfony/') && !interface_exists('Symfony\\Component\\Lock\\BlockingStoreInterface')) {
            continue; // the Symfony store only where symfony/lock is installed
        }
        $class = 'Redlock\\' . str_replace('/', '\\', substr($file->getPathname(), strlen($source) + 1, -4));
        class_exists($class) || interface_exists($class);
    }
}

if (\Redlock\Ffi\Native::preloaded() === null) {
    \Redlock\Ffi\Native::preload(
        getenv('REDLOCK_LIBRARY') ?: null,
        getenv('REDLOCK_HEADER') ?: null,
        getenv('REDLOCK_PRELOAD_DIR') ?: null,
    );
}
