import { EventEmitter } from 'node:events';

/**
 * In-process nudges: a new event for a run (wakes SSE followers) or a newly queued run (wakes the
 * worker). Only a latency shortcut — followers and workers still poll the database, which is the
 * truth when the API and the worker live in different processes.
 */
export interface RunBus {
  publish(runId: string): void;
  subscribe(runId: string, fn: () => void): () => void;
  wake(): void;
  onWake(fn: () => void): () => void;
  /** A cancel was stored for a running run: its worker in this process aborts without waiting for a poll. */
  cancel(runId: string): void;
  onCancel(fn: (runId: string) => void): () => void;
}

export function createRunBus(): RunBus {
  const ee = new EventEmitter();
  ee.setMaxListeners(0);
  return {
    publish: (runId) => ee.emit(`run:${runId}`),
    cancel(runId) {
      ee.emit(`run:${runId}`);
      ee.emit('cancel', runId);
    },
    onCancel(fn) {
      ee.on('cancel', fn);
      return () => ee.off('cancel', fn);
    },
    subscribe(runId, fn) {
      ee.on(`run:${runId}`, fn);
      return () => ee.off(`run:${runId}`, fn);
    },
    wake: () => ee.emit('wake'),
    onWake(fn) {
      ee.on('wake', fn);
      return () => ee.off('wake', fn);
    },
  };
}
