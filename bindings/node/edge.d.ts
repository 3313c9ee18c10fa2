// Edge-runtime entry point: call init() with the imported WebAssembly module first.

export * from './api.js';

/** Instantiates the core; later calls do nothing. */
export function init(module: WebAssembly.Module | BufferSource): void;
