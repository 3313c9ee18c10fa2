<?php
// Loads libredlock through PHP's FFI with the generated PHP header and drives one
// acquisition to its outcome, so a header PHP cannot parse fails the tests.
//   php ffi/tests/php_load.php ffi/include/redlock_php.h path/to/libredlock.so

declare(strict_types=1);

[$script, $header, $library] = $argv + [null, null, null];
if ($header === null || $library === null) {
    fwrite(STDERR, "usage: php php_load.php HEADER LIBRARY\n");
    exit(2);
}
$ffi = FFI::cdef(file_get_contents($header), $library);
$checks = 0;
$failures = 0;

function check(bool $ok, string $what): void
{
    global $checks, $failures;
    $checks++;
    if (!$ok) {
        $failures++;
        fwrite(STDERR, "FAIL: $what\n");
    }
}

function ok(int $rc, string $what): void
{
    global $ffi;
    check($rc === $ffi->REDLOCK_OK, "$what gave " . $ffi->redlock_result_name($rc));
}

check($ffi->redlock_version() !== '', 'version');
check($ffi->REDLOCK_MAX_NODES === 255, 'constants are enums');
check($ffi->redlock_result_name($ffi->REDLOCK_CONFIG_NO_NODES) === 'no_nodes', 'result names');

$builder = $ffi->new('redlock_config_builder*');
$config = $ffi->new('redlock_config*');
ok($ffi->redlock_config_builder_new(0, 10000, FFI::addr($builder)), 'builder');
check($ffi->redlock_config_builder_build($builder, FFI::addr($config)) === $ffi->REDLOCK_CONFIG_NO_NODES, 'config error');
$ffi->redlock_config_builder_free($builder);
ok($ffi->redlock_config_builder_new(3, 10000, FFI::addr($builder)), 'builder');
ok($ffi->redlock_config_builder_build($builder, FFI::addr($config)), 'build');
$ffi->redlock_config_builder_free($builder);
check($ffi->redlock_config_quorum($config) === 2, 'quorum');

$seed = $ffi->new('uint8_t[32]');
$client = $ffi->new('redlock_client*');
ok($ffi->redlock_client_new_seeded($config, $seed, 32, FFI::addr($client)), 'client');

$name = 'orders:42';
$resource = $ffi->new('uint8_t[' . strlen($name) . ']');
FFI::memcpy($resource, $name, strlen($name));
$resources = $ffi->new('uint8_t*[1]');
$resources[0] = $ffi->cast('uint8_t*', $resource);
$lens = $ffi->new('size_t[1]');
$lens[0] = strlen($name);
$op = $ffi->new('redlock_operation*');
ok($ffi->redlock_client_acquire($client, $ffi->cast('const uint8_t**', $resources), $lens, 1, 1000, FFI::addr($op)), 'acquire');

$kind = $ffi->new('uint32_t');
$node = $ffi->new('size_t');
$request = $ffi->new('uint64_t');
$deadline = $ffi->new('uint64_t');
$argc = $ffi->new('size_t');
$arg = $ffi->new('const uint8_t*');
$argLen = $ffi->new('size_t');
$requests = [];
while (true) {
    ok($ffi->redlock_operation_poll_output($op, FFI::addr($kind)), 'poll');
    if ($kind->cdata !== $ffi->REDLOCK_OUTPUT_SEND) {
        break;
    }
    ok($ffi->redlock_operation_command($op, FFI::addr($node), FFI::addr($request), FFI::addr($deadline), FFI::addr($argc)), 'command');
    ok($ffi->redlock_operation_command_arg($op, 0, FFI::addr($arg), FFI::addr($argLen)), 'arg');
    check(FFI::string($arg, $argLen->cdata) === 'SET', 'SET command');
    $requests[] = $request->cdata;
}
check(count($requests) === 3 && $kind->cdata === $ffi->REDLOCK_OUTPUT_WAIT, 'three sends then a wait');
$outcome = $ffi->new('redlock_outcome*');
foreach ($requests as $id) {
    ok($ffi->redlock_operation_handle_reply($op, $id, $ffi->REDLOCK_REPLY_OK, 0, null, 0, 1500), 'reply');
    ok($ffi->redlock_operation_poll_output($op, FFI::addr($kind)), 'poll');
    if ($kind->cdata === $ffi->REDLOCK_OUTPUT_OUTCOME) {
        ok($ffi->redlock_operation_take_outcome($op, FFI::addr($outcome)), 'outcome');
        break;
    }
}
check($ffi->redlock_outcome_kind($outcome) === $ffi->REDLOCK_OUTCOME_ACQUIRED, 'acquired');
$validUntil = $ffi->new('uint64_t');
ok($ffi->redlock_outcome_valid_until($outcome, FFI::addr($validUntil)), 'valid_until');
check($validUntil->cdata === 1000 + 10000000 - 102000, 'valid_until value');

$message = $ffi->new('uint8_t[' . $ffi->REDLOCK_MESSAGE_MAX . ']');
$messageLen = $ffi->new('size_t');
ok($ffi->redlock_result_message($ffi->REDLOCK_UNKNOWN_REQUEST, $message, $ffi->REDLOCK_MESSAGE_MAX, FFI::addr($messageLen)), 'message');
check(str_contains(FFI::string($message, $messageLen->cdata), 'request'), 'message text');

$ffi->redlock_outcome_free($outcome);
$ffi->redlock_operation_free($op);
$ffi->redlock_client_free($client);
$ffi->redlock_config_free($config);

echo "php: FFI::cdef loaded the PHP header and drove an acquisition\n";
echo ($checks - $failures) . " passed, $failures failed\n";
exit($failures === 0 ? 0 : 1);
