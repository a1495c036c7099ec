// @peculiar/x509 behind one module that pki.ts imports on first use. tsyringe (used inside x509)
// needs the Reflect metadata API before x509 loads, hence the import order. Re-exported as one
// binding: a bundler cannot list the names of a CommonJS module for `export *` in a lazy chunk.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

export { x509 };
