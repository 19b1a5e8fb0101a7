// `make dev`: a local control plane, two real nodes (kubelet, containerd, runc; the kubelet
// simulator plays them only where a real node cannot run: not root, no cgroups) and
// `sidecar-terminator serve`, until Ctrl-C. The code lives in test/support/demo.ts (type-checked,
// and shared with the test that follows "Try it" of docs/getting-started.md).
import { runDev } from '../test/support/demo.ts';

process.exitCode = await runDev(process.argv.slice(2));
