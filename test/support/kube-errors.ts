import { expect } from 'vitest';
import { KubeApiError } from '../../lib/kube/errors.ts';

/** The KubeApiError `p` rejects with; fails the test when it resolves or rejects with anything else. */
export async function kubeRejection(p: Promise<unknown>): Promise<KubeApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KubeApiError);
  return err as KubeApiError;
}
