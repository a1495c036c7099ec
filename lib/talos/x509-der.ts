// The DER subset X.509 certificates need (X.690 distinguished encoding): definite lengths in their
// shortest form, minimal INTEGERs, and a reader that only walks TLVs. Certificates are built from
// these by x509-cert.ts; nothing here knows what a certificate is.

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

/** [n] EXPLICIT (constructed) and [n] IMPLICIT on a primitive type, context-specific class. */
export const contextConstructed = (n: number): number => 0xa0 | n;
export const contextPrimitive = (n: number): number => 0x80 | n;

/** A non-negative integer's big-endian bytes, none for 0. */
function bigEndian(value: number): number[] {
  const bytes: number[] = [];
  for (let rest = value; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
  return bytes;
}

function lengthOctets(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes = bigEndian(length);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export function tlv(tag: number, content: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([tag]), lengthOctets(content.length), content]);
}

export const sequence = (...items: Uint8Array[]): Buffer => tlv(TAG.SEQUENCE, Buffer.concat(items));

/** A SET OF; DER orders the elements by their encodings. */
export const setOf = (...items: Buffer[]): Buffer => tlv(TAG.SET, Buffer.concat([...items].sort(Buffer.compare)));

export const explicit = (n: number, inner: Uint8Array): Buffer => tlv(contextConstructed(n), inner);

export const octetString = (bytes: Uint8Array): Buffer => tlv(TAG.OCTET_STRING, bytes);

export const booleanTrue = (): Buffer => Buffer.from([TAG.BOOLEAN, 1, 0xff]);

/** An INTEGER from unsigned big-endian magnitude bytes: leading zeros dropped, one 0x00 kept if the top bit is set. */
export function unsignedInteger(magnitude: Uint8Array): Buffer {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const bytes = Buffer.from(magnitude.subarray(start));
  if (bytes.length === 0) return tlv(TAG.INTEGER, Buffer.from([0]));
  return tlv(TAG.INTEGER, (bytes[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

export function smallInteger(value: number): Buffer {
  if (!Number.isInteger(value) || value < 0 || value > 0x7fffffff) throw new RangeError(`integer ${value} out of range`);
  return unsignedInteger(Buffer.from(bigEndian(value)));
}

/** A BIT STRING whose length is a whole number of bytes (keys, signatures). */
export const bitStringOfBytes = (bytes: Uint8Array): Buffer => tlv(TAG.BIT_STRING, Buffer.concat([Buffer.from([0]), bytes]));

/**
 * A named-bit BIT STRING (bit 0 is the most significant bit of the first byte). DER drops trailing
 * zero bits and counts the unused bits of the last byte (X.690 11.2.2).
 */
export function namedBits(bits: readonly number[]): Buffer {
  if (bits.length === 0) return tlv(TAG.BIT_STRING, Buffer.from([0]));
  const highest = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1);
  for (const bit of bits) bytes[bit >> 3] = (bytes[bit >> 3] ?? 0) | (0x80 >> (bit & 7));
  return tlv(TAG.BIT_STRING, Buffer.concat([Buffer.from([7 - (highest & 7)]), bytes]));
}

/** An OBJECT IDENTIFIER from its dotted form. */
export function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map((arc) => {
    if (!/^\d+$/.test(arc)) throw new Error(`invalid OID ${dotted}`);
    return Number(arc);
  });
  const [first, second, ...rest] = arcs;
  if (first === undefined || second === undefined || first > 2 || (first < 2 && second > 39)) throw new Error(`invalid OID ${dotted}`);
  const out: number[] = [];
  for (const arc of [first * 40 + second, ...rest]) {
    if (!Number.isSafeInteger(arc)) throw new Error(`invalid OID ${dotted}`);
    const base128 = [arc % 128];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift((v % 128) | 0x80);
    out.push(...base128);
  }
  return tlv(TAG.OID, Buffer.from(out));
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/**
 * RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050; both in whole seconds with Z
 * (a fraction is not allowed, so milliseconds are dropped).
 */
export function time(date: Date): Buffer {
  const year = date.getUTCFullYear();
  if (!Number.isFinite(date.getTime()) || year < 1950 || year > 9999) throw new RangeError('certificate time out of range');
  const rest = pad(date.getUTCMonth() + 1, 2) + pad(date.getUTCDate(), 2) + pad(date.getUTCHours(), 2) + pad(date.getUTCMinutes(), 2) + pad(date.getUTCSeconds(), 2) + 'Z';
  if (year < 2050) return tlv(TAG.UTC_TIME, Buffer.from(pad(year % 100, 2) + rest, 'latin1'));
  return tlv(TAG.GENERALIZED_TIME, Buffer.from(pad(year, 4) + rest, 'latin1'));
}

/** One element as read: its tag, its whole encoding, and its content. */
export interface Element {
  tag: number;
  encoded: Buffer;
  content: Buffer;
}

/** Reads the element at `offset` (single-byte tags, definite lengths; what X.509 DER uses). */
export function readElement(der: Buffer, offset = 0): Element {
  const tag = der[offset];
  const first = der[offset + 1];
  if (tag === undefined || first === undefined) throw new Error('DER: truncated element');
  if ((tag & 0x1f) === 0x1f) throw new Error('DER: multi-byte tags are not supported');
  let length = first;
  let header = 2;
  if (first & 0x80) {
    const count = first & 0x7f;
    if (count === 0 || count > 4) throw new Error('DER: unsupported length');
    length = 0;
    for (let i = 0; i < count; i++) {
      const byte = der[offset + 2 + i];
      if (byte === undefined) throw new Error('DER: truncated length');
      length = length * 256 + byte;
    }
    header += count;
  }
  const end = offset + header + length;
  if (end > der.length) throw new Error('DER: element runs past its container');
  return { tag, encoded: der.subarray(offset, end), content: der.subarray(offset + header, end) };
}

/** The elements inside a constructed element's content, in order. */
export function children(content: Buffer): Element[] {
  const out: Element[] = [];
  for (let offset = 0; offset < content.length; ) {
    const element = readElement(content, offset);
    out.push(element);
    offset += element.encoded.length;
  }
  return out;
}
