import type { TalosApiErrorCode } from './errors.ts';

/**
 * Why a call failed, classified where it is known (the dial, the stream, the reply), before the
 * client names the node and the method in a TalosApiError.
 */
export class CallFailure extends Error {
  override name = 'CallFailure';
  constructor(
    readonly code: TalosApiErrorCode,
    /** gRPC status: the node's, or the one a transport failure stands for. */
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}
