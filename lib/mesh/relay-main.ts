// `node relay-main.js <listen-ip> <node-port-base> <hub-port-base> <first-slot> <last-slot>`: the relay on its public host.
import { startRelay } from './relay.ts';

const [host, nodeBase, hubBase, first, last] = process.argv.slice(2);
if (!host || !nodeBase || !hubBase || !first || !last) {
  process.stderr.write('usage: relay-main <listen-ip> <node-port-base> <hub-port-base> <first-slot> <last-slot>\n');
  process.exit(2);
}
const slots = Array.from({ length: Number(last) - Number(first) + 1 }, (_, i) => Number(first) + i);
const relay = await startRelay({ host, nodePortBase: Number(nodeBase), hubPortBase: Number(hubBase), slots });
process.stdout.write(`relaying ${slots.length} slots on ${host}\n`);
const stop = () => { relay.close(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
