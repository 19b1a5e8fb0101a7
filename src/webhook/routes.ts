// The paths the webhook answers AdmissionReviews on: app.ts makes a POST route of each, which
// runs the handler review.ts's HANDLERS gives it; the metrics have a series for each from the start.
export const ADMISSION_ENDPOINTS = ['validate', 'mutate', 'native-sidecars'] as const;
export type AdmissionEndpoint = (typeof ADMISSION_ENDPOINTS)[number];
