// Conversion between Hrana `Value`s and what the embedded engine binds and returns. The engine runs
// with safe integers on, so an SQLite INTEGER arrives as a bigint and only a REAL as a JS number:
// that keeps the protocol's integer/float distinction without guessing from the number's value.
import { HranaFault, type Value } from './proto.ts';

export type SqlValue = null | bigint | number | string | Buffer;

const MIN_I64 = -(2n ** 63n);
const MAX_I64 = 2n ** 63n - 1n;

export function valueToSql(value: Value): SqlValue {
  switch (value.type) {
    case 'null':
      return null;
    case 'integer': {
      if (!/^-?\d+$/.test(value.value)) throw new HranaFault(`integer value is not a decimal string: ${JSON.stringify(value.value)}`, 'ARGS_INVALID');
      const n = BigInt(value.value);
      if (n < MIN_I64 || n > MAX_I64) throw new HranaFault('integer value does not fit in 64 bits', 'ARGS_INVALID');
      return n;
    }
    case 'float':
      return value.value;
    case 'text':
      return value.value;
    case 'blob':
      return Buffer.from(value.base64, 'base64');
  }
}

export function valueFromSql(value: unknown): Value {
  if (value === null || value === undefined) return { type: 'null' };
  if (typeof value === 'bigint') return { type: 'integer', value: value.toString() };
  if (typeof value === 'number') {
    // JSON has no NaN or infinities; SQLite stores NaN as NULL but can hold ±Inf.
    if (!Number.isFinite(value)) throw new HranaFault('float value is not finite and cannot be sent as JSON', 'VALUE_NOT_REPRESENTABLE');
    return { type: 'float', value };
  }
  if (typeof value === 'string') return { type: 'text', value };
  if (value instanceof Uint8Array) return { type: 'blob', base64: Buffer.from(value).toString('base64') };
  throw new HranaFault(`unexpected value from the engine: ${typeof value}`, 'INTERNAL');
}
