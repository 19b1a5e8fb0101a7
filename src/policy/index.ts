// The policy core: pure rules shared by the webhook, the watcher and the lint command.
export * from './types.ts';
export * from './markers.ts';
export * from './stop-method.ts';
export * from './image.ts';
export * from './nodes.ts';
export * from './findings.ts';
export * from './validate.ts';
export * from './codes.ts';
export * from './restarts.ts';
export * from './decide.ts';
export * from './templates.ts';
export * from './names.ts';
export * from './inspect.ts';
export * from './signal-container.ts';
export * from './stop-plan.ts';
export * from './retained-pod.ts';
export * from './native-sidecars.ts';
