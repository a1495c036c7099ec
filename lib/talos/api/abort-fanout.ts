// A collect pass shares one AbortSignal across hundreds of concurrent calls. One 'abort' listener
// per call on that signal crosses Node's limit of ten and prints a MaxListenersExceededWarning on
// every pass; instead each signal gets a single listener that fans out to the calls in flight.
const inFlight = new WeakMap<AbortSignal, Set<() => void>>();

/** Runs `onAbort` when `signal` aborts; the returned function unregisters it (call it when the call ends). */
export function whenAborted(signal: AbortSignal | undefined, onAbort: () => void): () => void {
  if (!signal) return () => {};
  let calls = inFlight.get(signal);
  if (!calls) {
    const set = new Set<() => void>();
    calls = set;
    inFlight.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        const pending = [...set];
        set.clear();
        for (const f of pending) f();
      },
      { once: true },
    );
  }
  const set = calls;
  set.add(onAbort);
  return () => {
    set.delete(onAbort);
  };
}
