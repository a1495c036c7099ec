/**
 * Encodes messages through the loaded protos and compares them with bytes written by hand from
 * upstream's field numbers, so a mis-numbered field in lib/talos/api/protos cannot slip through
 * (the simulator uses the same protos, so only this test would notice).
 */
import { describe, expect, it } from 'vitest';
import type { MethodDefinition } from '@grpc/grpc-js';
import { loadTalosServices } from '../lib/talos/api/proto-loader.ts';

type AnyMethod = MethodDefinition<object, object>;

function method(service: 'machine' | 'image' | 'lifecycle', name: string): AnyMethod {
  const m = loadTalosServices()[service][name] as AnyMethod | undefined;
  if (!m) throw new Error(`no ${name}`);
  return m;
}

const tag = (field: number, wire: number): number => (field << 3) | wire;

describe('Talos proto wire format', () => {
  it('uses upstream method paths', () => {
    expect(method('machine', 'ApplyConfiguration').path).toBe('/machine.MachineService/ApplyConfiguration');
    expect(method('machine', 'Upgrade').path).toBe('/machine.MachineService/Upgrade');
    expect(method('image', 'Pull').path).toBe('/machine.ImageService/Pull');
    expect(method('lifecycle', 'Upgrade').path).toBe('/machine.LifecycleService/Upgrade');
    expect(method('lifecycle', 'Upgrade').responseStream).toBe(true);
  });

  it('ApplyConfigurationRequest: data=1, mode=4, dry_run=5, try_mode_timeout=6', () => {
    const bytes = method('machine', 'ApplyConfiguration').requestSerialize({
      data: Buffer.from('ab'),
      mode: 'TRY',
      dry_run: true,
      try_mode_timeout: { seconds: '90', nanos: 0 },
    });
    expect([...bytes]).toEqual([tag(1, 2), 2, 0x61, 0x62, tag(4, 0), 4, tag(5, 0), 1, tag(6, 2), 4, tag(1, 0), 90, tag(2, 0), 0]);
  });

  it('UpgradeRequest: image=1, preserve=2, stage=3, force=4', () => {
    const bytes = method('machine', 'Upgrade').requestSerialize({ image: 'i', preserve: true, stage: true, force: true });
    expect([...bytes]).toEqual([tag(1, 2), 1, 0x69, tag(2, 0), 1, tag(3, 0), 1, tag(4, 0), 1]);
  });

  it('ImageServicePullRequest: containerd=1 {driver=1, namespace=2}, image_ref=3', () => {
    const bytes = method('image', 'Pull').requestSerialize({ containerd: { driver: 'CRI', namespace: 'NS_SYSTEM' }, image_ref: 'x' });
    expect([...bytes]).toEqual([tag(1, 2), 4, tag(1, 0), 1, tag(2, 0), 1, tag(3, 2), 1, 0x78]);
  });

  it('LifecycleServiceUpgradeRequest: containerd=1, source=2 {image_name=1}', () => {
    const bytes = method('lifecycle', 'Upgrade').requestSerialize({ containerd: { driver: 'CRI', namespace: 'NS_SYSTEM' }, source: { image_name: 'y' } });
    expect([...bytes]).toEqual([tag(1, 2), 4, tag(1, 0), 1, tag(2, 0), 1, tag(2, 2), 3, tag(1, 2), 1, 0x79]);
  });

  it('LifecycleServiceUpgradeResponse: progress=1 {message=1 | exit_code=2}', () => {
    const m = method('lifecycle', 'Upgrade');
    const decoded = m.responseDeserialize(Buffer.from([tag(1, 2), 2, tag(2, 0), 3])) as { progress: Record<string, unknown> };
    expect(decoded.progress['response']).toBe('exit_code');
    expect(decoded.progress['exit_code']).toBe(3);
  });

  it('EtcdMember ids (field 2) survive as exact uint64 strings; metadata.error is field 2', () => {
    // EtcdMemberListResponse{messages=1: EtcdMembers{metadata=1{error=2:"e"}, members=3: EtcdMember{id=2: 2^64-1}}}
    const id = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    const member = [tag(2, 0), ...id];
    const metadata = [tag(2, 2), 1, 0x65];
    const members = [tag(1, 2), metadata.length, ...metadata, tag(3, 2), member.length, ...member];
    const bytes = Buffer.from([tag(1, 2), members.length, ...members]);
    const decoded = method('machine', 'EtcdMemberList').responseDeserialize(bytes) as {
      messages: { metadata: { error: string }; members: { id: string }[] }[];
    };
    expect(decoded.messages[0]?.members[0]?.id).toBe('18446744073709551615');
    expect(decoded.messages[0]?.metadata.error).toBe('e');
  });

  it('EtcdMemberStatus: member_id=10, storage_version=11', () => {
    const status = [tag(10, 0), 7, tag(11, 2), 1, 0x33];
    const etcdStatus = [tag(2, 2), status.length, ...status];
    const bytes = Buffer.from([tag(1, 2), etcdStatus.length, ...etcdStatus]);
    const decoded = method('machine', 'EtcdStatus').responseDeserialize(bytes) as { messages: { member_status: Record<string, unknown> }[] };
    expect(decoded.messages[0]?.member_status['member_id']).toBe('7');
    expect(decoded.messages[0]?.member_status['storage_version']).toBe('3');
  });
  it('Memory (a collect read) decodes counters as numbers and leaves unset fields out; etcd ids stay strings', () => {
    // MemoryResponse{messages=1: Memory{meminfo=2: MemInfo{memtotal=1: 300, memavailable=3: 0}}}
    const meminfo = [tag(1, 0), 0xac, 0x02, tag(3, 0), 0];
    const memory = [tag(2, 2), meminfo.length, ...meminfo];
    const bytes = Buffer.from([tag(1, 2), memory.length, ...memory]);
    const decoded = method('machine', 'Memory').responseDeserialize(bytes) as { messages: { metadata?: unknown; meminfo: Record<string, unknown> }[] };
    expect(decoded.messages[0]?.meminfo['memtotal']).toBe(300);
    expect(decoded.messages[0]?.meminfo['memavailable']).toBe(0);
    expect(decoded.messages[0]?.meminfo).not.toHaveProperty('memfree');
    expect(decoded.messages[0]?.metadata).toBeUndefined();
    // EtcdMemberList keeps the full decoding: defaults filled in, 64-bit ids as strings.
    const empty = method('machine', 'EtcdMemberList').responseDeserialize(Buffer.from([tag(1, 2), 0])) as { messages: { members: unknown[]; metadata: unknown }[] };
    expect(empty.messages[0]?.members).toEqual([]);
    expect(empty.messages[0]?.metadata).toBeNull();
  });
});
