// Whether two versions of an object say the same, apart from what the server keeps about it
// (resourceVersion, managedFields, status and the like): how a dry-run apply, whose answer never
// moves the resourceVersion, tells "configured" from "unchanged".
import { isDeepStrictEqual } from 'node:util';

const SERVER_METADATA = ['resourceVersion', 'generation', 'managedFields', 'uid', 'creationTimestamp', 'selfLink'];

function content(obj: Record<string, unknown>): Record<string, unknown> {
  const { status: _status, metadata, ...rest } = obj;
  const meta = { ...(metadata as Record<string, unknown> | undefined) };
  for (const k of SERVER_METADATA) delete meta[k];
  return { ...rest, metadata: meta };
}

export function sameContent(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  return isDeepStrictEqual(content(a), content(b));
}
