export { parseNodeAddress, formatNodeAddress, grpcTarget, InvalidNodeAddressError, TALOS_API_PORT, type NodeAddress } from './address.ts';
export { TalosApiClient, createTalosClient, createTalosSecureContext, DEFAULT_UNARY_DEADLINE_MS, DEFAULT_STREAM_DEADLINE_MS, type TalosClientOptions } from './client.ts';
export { TalosApiError, isTalosApiError, isUnimplemented, type TalosApiErrorCode } from './errors.ts';
export { parseFingerprint, talosFingerprint, InvalidFingerprintError } from './fingerprint.ts';
export type * from './types.ts';
export { TalosChannelPool, type TalosChannelPoolOptions } from './channel-pool.ts';
