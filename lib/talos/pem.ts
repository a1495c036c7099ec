// PEM framing only; what each label means for Talos is decided in pki.ts.

export interface PemBlock {
  label: string;
  der: Buffer;
}

export function encodePem(label: string, der: Uint8Array): string {
  const body = Buffer.from(der).toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END \1-----/g;

export function decodePem(pem: string): PemBlock[] {
  const blocks: PemBlock[] = [];
  for (const match of pem.matchAll(BLOCK)) {
    const label = match[1] ?? '';
    const body = (match[2] ?? '').replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body)) throw new Error(`PEM block ${label} has an invalid body`);
    blocks.push({ label, der: Buffer.from(body, 'base64') });
  }
  return blocks;
}

export function decodeSinglePem(pem: string, expectedLabels: readonly string[]): PemBlock {
  const blocks = decodePem(pem);
  if (blocks.length !== 1) throw new Error(`expected one PEM block, found ${blocks.length}`);
  const block = blocks[0] as PemBlock;
  if (!expectedLabels.includes(block.label)) {
    throw new Error(`unexpected PEM label ${block.label} (want ${expectedLabels.join(' or ')})`);
  }
  return block;
}

/** Talos (Go) stores PEM in YAML as standard base64 of the PEM text. */
export function pemToBase64(pem: string): string {
  return Buffer.from(pem, 'utf8').toString('base64');
}

export function base64ToPem(value: string): string {
  return Buffer.from(value, 'base64').toString('utf8');
}
