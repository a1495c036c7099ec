// A direct writer for the plain JSON-like trees a machine config is made of, producing the very
// bytes `yaml`'s stringify gives with the options below. Every config of a push is written, and
// the library builds a node tree and runs its general scalar logic for each of a few hundred
// values; this writer walks the tree once. Whatever it is not sure to write the same way (multi-
// line or non-ASCII text, floats, quotes, empty collections inside sequences…) goes to `yaml`.
import { Document, stringify } from 'yaml';

/** The options every machine config is written with (see stringifyDocuments in config.ts). */
export const YAML_OPTIONS = { indent: 4, lineWidth: 0, aliasDuplicateObjects: false } as const;

const STEP = '    ';

/** Thrown inside the writer for anything it leaves to `yaml`. */
class Unsupported extends Error {}
const UNSUPPORTED = new Unsupported();

// The scalar types of `yaml`'s default (core) schema other than str: a string one of them would
// read back (`true`, `12`, `~`, `0x1f`, `1e3`…) must be quoted, as `yaml` does.
const NON_STRING_TESTS: RegExp[] = new Document().schema.tags.flatMap((t) =>
  t.default && t.tag !== 'tag:yaml.org,2002:str' && t.test instanceof RegExp ? [t.test] : [],
);

/** `yaml`'s rule for text that cannot be written plain (an indicator first, `: `, ` #`, a trailing space or colon…). */
const NOT_PLAIN = /^[\n\t ,[\]{}#&*!|>'"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]$/;
/** Printable ASCII without quotes or backslash: the only text written here, plain or in double quotes. */
const SIMPLE_TEXT = /^[\x20\x21\x23-\x26\x28-\x5b\x5d-\x7e]*$/;
/** A line starting like a document marker makes `yaml` use block style at the root. */
const DOCUMENT_MARKER = /^(%|---|\.\.\.)/;

/**
 * Base64, names, versions, IPv4 addresses: text that cannot hold an indicator, `: `, ` #` or a
 * trailing space or colon, so only the scalar tests decide. Most of a config, checked in one scan.
 */
const WORDLIKE = /^[A-Za-z0-9][A-Za-z0-9+/=._-]*$/;

/** A key or value string as `yaml` writes it on one line (a key is never folded; lineWidth 0 folds nothing). */
function text(value: string): string {
  if (!WORDLIKE.test(value)) {
    if (!SIMPLE_TEXT.test(value) || DOCUMENT_MARKER.test(value)) throw UNSUPPORTED;
    if (NOT_PLAIN.test(value)) return `"${value}"`;
  }
  return NON_STRING_TESTS.some((re) => re.test(value)) ? `"${value}"` : value;
}

function key(k: string): string {
  // `yaml` makes keys longer than 1024 characters explicit (`? key`).
  if (k.length > 1000) throw UNSUPPORTED;
  return text(k);
}

function scalar(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return text(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      // Integers only: floats, -0 and exponents have their own formatting rules.
      if (!Number.isSafeInteger(value) || Object.is(value, -0)) throw UNSUPPORTED;
      return String(value);
    case 'object':
      return value === null ? 'null' : undefined;
    default:
      throw UNSUPPORTED;
  }
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A non-empty mapping's pairs, each line starting with `indent` (the first after `first`). */
function writeMap(out: string[], obj: Record<string, unknown>, indent: string, first: string): void {
  let lead = first;
  for (const k of Object.keys(obj)) {
    const value = obj[k];
    const s = scalar(value);
    if (s !== undefined) {
      out.push(`${lead}${key(k)}: ${s}\n`);
    } else if (Array.isArray(value)) {
      if (value.length === 0) out.push(`${lead}${key(k)}: []\n`);
      else {
        out.push(`${lead}${key(k)}:\n`);
        writeSeq(out, value, indent + STEP);
      }
    } else {
      const o = value as object;
      if (!isPlainObject(o)) throw UNSUPPORTED;
      if (Object.keys(o).length === 0) out.push(`${lead}${key(k)}: {}\n`);
      else {
        out.push(`${lead}${key(k)}:\n`);
        writeMap(out, o, indent + STEP, indent + STEP);
      }
    }
    lead = indent;
  }
}

/** A non-empty sequence's items at `indent`; a mapping item starts on the dash's line. */
function writeSeq(out: string[], items: unknown[], indent: string): void {
  for (let i = 0; i < items.length; i++) {
    if (!(i in items)) throw UNSUPPORTED;
    const item = items[i];
    const s = scalar(item);
    if (s !== undefined) {
      out.push(`${indent}- ${s}\n`);
      continue;
    }
    const o = item as object;
    if (Array.isArray(o) || !isPlainObject(o) || Object.keys(o).length === 0) throw UNSUPPORTED;
    writeMap(out, o, `${indent}  `, `${indent}- `);
  }
}

/** One document, or undefined when it holds something this writer leaves to `yaml`. */
function fastDocument(doc: unknown): string | undefined {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc) || !isPlainObject(doc) || Object.keys(doc).length === 0) return undefined;
  const out: string[] = [];
  try {
    writeMap(out, doc, '', '');
  } catch (err) {
    if (err instanceof Unsupported) return undefined;
    throw err;
  }
  return out.join('');
}

/** `stringify(doc, YAML_OPTIONS)`, byte for byte. */
export function stringifyConfigDocument(doc: unknown): string {
  return fastDocument(doc) ?? stringify(doc, YAML_OPTIONS);
}

/** For tests: whether a document is written here rather than by `yaml`. */
export function writtenDirectly(doc: unknown): boolean {
  return fastDocument(doc) !== undefined;
}
