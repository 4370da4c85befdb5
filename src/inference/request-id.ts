/** Request ids: sortable by time, and within one instance by arrival, unique across instances. */
let sequence = 0;

/**
 * `req_` + milliseconds (base 36) + a per-process sequence + random hex: ordered by arrival on one
 * instance, unique across instances.
 */
export function newRequestId(): string {
  sequence = (sequence + 1) % 1_679_616;
  const time = Date.now().toString(36).padStart(9, "0");
  return `req_${time}${sequence.toString(36).padStart(4, "0")}${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`;
}
