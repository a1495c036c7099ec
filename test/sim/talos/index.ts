export { startSimNode, SimTalosNode, versionFromImage, type SimNodeOptions, type SimPhase, type SimEtcdMember, type ReceivedConfig } from './sim-node.ts';
export { createTestOsCa, issueTestClientCert, issueCert, testMachineConfig, toTalosKeyLabel, type TestCa, type TestKeyPair } from './test-pki.ts';
