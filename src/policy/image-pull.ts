// The kubelet's waiting reasons for a container whose image cannot be pulled: it retries the
// pull and never gives up, so such a container never starts by itself.

export const IMAGE_PULL_FAILURES: ReadonlySet<string> = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull']);

/** Whether a waiting reason says the container's image cannot be pulled. */
export function isImagePullFailure(reason: string | undefined): boolean {
  return reason !== undefined && IMAGE_PULL_FAILURES.has(reason);
}
