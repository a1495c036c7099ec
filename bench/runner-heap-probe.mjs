// Preloaded (with --expose-gc) into the runner bench/runner.ts keeps up for the passes. RSS after
// the passes mostly says how much garbage V8 let accumulate before its last major GC, which swings
// by ±15 MB from run to run; what the process holds after a full GC is the steadier figure for
// comparing code changes. On SIGUSR2 it collects twice and writes the reading to a file.
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import v8 from 'node:v8';

const out = process.env.REZUS_BENCH_HEAP_OUT;
if (out) {
  process.on('SIGUSR2', () => {
    // Before the GC: how far V8 let the heap grow with garbage, which is what RSS follows.
    const before = process.memoryUsage();
    globalThis.gc?.();
    globalThis.gc?.();
    const m = process.memoryUsage();
    const code = v8.getHeapCodeStatistics();
    writeFileSync(out, JSON.stringify({ heapUsed: m.heapUsed, external: m.external, scriptSource: code.external_script_source_size, rss: m.rss, heapTotalBefore: before.heapTotal }));
  });
}
