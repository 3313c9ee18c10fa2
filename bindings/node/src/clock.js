// The package's monotonic clock, in microseconds, as the core takes time.
// performance.now() is monotonic in Node.js and in workerd (where it advances with I/O,
// so a round's start can only be read early, which shortens validity, never lengthens it).
export function nowUs() {
  return performance.now() * 1000;
}
