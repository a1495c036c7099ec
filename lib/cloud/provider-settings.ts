// providerSettings are module variables: a typo or a wrong type would otherwise surface only
// when tofu runs, long after the request that stored it was answered 2xx.
import { closest, distance } from 'fastest-levenshtein';
import { MODULE_VARIABLES, type VariableType } from './module-variables.ts';

export interface SettingProblem {
  /** `providerSettings.<provider>.<name>` */
  path: string;
  message: string;
}

const DESCRIBE: Record<VariableType, string> = {
  string: 'a string',
  number: 'a number',
  bool: 'true or false',
  'list(string)': 'a list of strings',
  'list(number)': 'a list of numbers',
  'map(string)': 'a map of strings',
};

const NUMERIC = /^-?\d+(\.\d+)?$/;

function fits(type: VariableType, v: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof v === 'string';
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'bool':
      return typeof v === 'boolean';
    case 'list(string)':
      return Array.isArray(v) && v.every((x) => typeof x === 'string');
    case 'list(number)':
      // tofu converts "123" to 123; the settings schema carries lists as strings.
      return Array.isArray(v) && v.every((x) => (typeof x === 'number' && Number.isFinite(x)) || (typeof x === 'string' && NUMERIC.test(x)));
    case 'map(string)':
      return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');
  }
}

/** A suggestion only when it is plausibly a typo, not just the least different name. */
function suggestion(name: string, known: string[]): string {
  if (known.length === 0) return '';
  const best = closest(name, known);
  return distance(name, best) <= Math.max(2, Math.floor(best.length / 3)) ? `; did you mean ${best}?` : '';
}

/**
 * Every unknown name and every value of the wrong type, in a stable order. Providers without a
 * module entry are left to the caller's schema (it lists the providers).
 */
export function checkProviderSettings(settings: Record<string, Record<string, unknown> | undefined>): SettingProblem[] {
  const problems: SettingProblem[] = [];
  for (const provider of Object.keys(settings).sort()) {
    const vars = MODULE_VARIABLES[provider];
    const given = settings[provider];
    if (!vars || !given) continue;
    const known = Object.keys(vars);
    for (const name of Object.keys(given).sort()) {
      const path = `providerSettings.${provider}.${name}`;
      const spec = vars[name];
      if (!spec) {
        problems.push({ path, message: `the ${provider} module has no setting ${name}${suggestion(name, known)}` });
      } else if (!fits(spec.type, given[name])) {
        problems.push({ path, message: `must be ${DESCRIBE[spec.type]}` });
      }
    }
  }
  return problems;
}
