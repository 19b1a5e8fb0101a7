// The load both admission benchmarks send: autocannon POSTing one AdmissionReview body.
import type { Options } from 'autocannon';

/** `connections` connections, one request at a time each (no pipelining), for `durationS` seconds, printing nothing. */
export function admissionLoad(url: string, body: string, connections: number, durationS: number): Options {
  return {
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections,
    pipelining: 1,
    duration: durationS,
    renderProgressBar: false,
    renderResultsTable: false,
    renderLatencyTable: false,
  };
}
