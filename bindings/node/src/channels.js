// Notice channels as map keys: a channel is given as text (UTF-8) or bytes, and comes
// back from a subscriber connection as bytes; both map to the same key.

const encoder = new TextEncoder();

/** A string key for `channel` (a string or a Uint8Array): its bytes, one char each. */
export function channelId(channel) {
  const bytes = typeof channel === 'string' ? encoder.encode(channel) : channel;
  let id = '';
  // In slices: String.fromCharCode takes its arguments on the stack.
  for (let i = 0; i < bytes.length; i += 4096) {
    id += String.fromCharCode(...bytes.subarray(i, i + 4096));
  }
  return id;
}
