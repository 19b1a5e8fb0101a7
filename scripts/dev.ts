// `make dev`: a local control plane, two real nodes (or the kubelet simulator where a real node
// cannot run) and `sidecar-terminator serve`, until Ctrl-C. The code lives in test/support/demo.ts (type-checked, and shared with the test that
// follows "Try it" of docs/getting-started.md).
import { runDev } from '../test/support/demo.ts';

process.exitCode = await runDev(process.argv.slice(2));
