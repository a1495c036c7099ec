// Machine-config patches as RFC 7386 JSON merge patches, given as YAML/JSON text or as objects.
import { parseAllDocuments } from 'yaml';
import { MAX_NESTING, nestsDeeperThan, textNesting } from '../nesting.ts';
import { isV1Alpha1 } from './schema.ts';

export type ConfigDocument = Record<string, unknown>;
/** YAML or JSON text (possibly several `---` documents), one document object, or a list of them. */
export type PatchInput = string | ConfigDocument | ConfigDocument[];

export class PatchError extends Error {
  constructor(
    readonly source: string,
    detail: string,
  ) {
    super(`${source}: ${detail}`);
    this.name = 'PatchError';
  }
}

function isPlainObject(value: unknown): value is ConfigDocument {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses a patch into its documents. `source` names the patch in errors (e.g. `machinePatches[1]`). */
export function parsePatch(input: PatchInput, source = 'patch'): ConfigDocument[] {
  let docs: unknown[];
  if (typeof input === 'string') {
    if (textNesting(input) > MAX_NESTING) throw new PatchError(source, `nests deeper than ${MAX_NESTING} levels`);
    docs = [];
    for (const [index, doc] of parseAllDocuments(input).entries()) {
      const first = doc.errors[0];
      // Report position only: the YAML library's message quotes the source line, which may hold secrets.
      if (first) {
        throw new PatchError(source, `invalid YAML/JSON in document ${index + 1} at line ${first.linePos?.[0].line ?? '?'} (${first.code})`);
      }
      const value: unknown = doc.toJS({ maxAliasCount: 100 });
      if (value !== null && value !== undefined) docs.push(value);
    }
  } else {
    docs = Array.isArray(input) ? input : [input];
  }
  if (docs.length === 0) throw new PatchError(source, 'is empty');
  if (nestsDeeperThan(docs, MAX_NESTING + 1)) throw new PatchError(source, `nests deeper than ${MAX_NESTING} levels`);
  return docs.map((doc, index) => {
    if (Array.isArray(doc)) throw new PatchError(source, 'JSON Patch (RFC 6902) lists are not supported; write a merge patch');
    if (!isPlainObject(doc)) throw new PatchError(source, `document ${index + 1} must be a mapping`);
    return structuredClone(doc);
  });
}

/** RFC 7386: objects merge key by key, `null` deletes, anything else (lists too) replaces. */
export function mergePatch(target: unknown, patch: unknown, path: string[] = []): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: ConfigDocument = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key === '__proto__') throw new Error(`${[...path, key].join('.')}: key not allowed`);
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value, [...path, key]);
  }
  return result;
}

function sameTarget(doc: ConfigDocument, patch: ConfigDocument): boolean {
  if (isV1Alpha1(patch) || patch.kind === undefined) return isV1Alpha1(doc);
  return doc.kind === patch.kind && doc.name === patch.name;
}

/**
 * Applies one parsed patch: a document without `kind` patches the v1alpha1 document; one with
 * `kind` (and `name`, for named kinds) patches the matching document, or is added when none matches.
 */
export function applyPatch(documents: ConfigDocument[], patch: ConfigDocument[], source = 'patch'): ConfigDocument[] {
  const result = [...documents];
  for (const patchDoc of patch) {
    if (patchDoc.kind !== undefined && typeof patchDoc.kind !== 'string') throw new PatchError(source, 'kind must be a string');
    const index = result.findIndex((doc) => sameTarget(doc, patchDoc));
    try {
      if (index === -1) {
        if (patchDoc.kind === undefined) throw new Error('there is no v1alpha1 document to patch');
        result.push(mergePatch({}, patchDoc) as ConfigDocument);
      } else {
        result[index] = mergePatch(result[index], patchDoc) as ConfigDocument;
      }
    } catch (error) {
      throw new PatchError(source, (error as Error).message);
    }
  }
  return result;
}
