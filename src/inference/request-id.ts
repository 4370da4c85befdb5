/** Request ids: sortable by time, and within one instance by arrival, unique across instances. */
let sequence = 0;
/** Random per process: ids of two instances never collide, even in the same millisecond. */
const INSTANCE = crypto.randomUUID().replace(/-/g, "").slice(0, 12);

/**
 * `req_` + milliseconds (base 36) + a per-process sequence + the process's random tag: ordered by
 * arrival on one instance, unique across instances, and cheap (no randomness per request).
 */
export function newRequestId(): string {
  sequence = (sequence + 1) % 1_679_616;
  return `req_${Date.now().toString(36).padStart(9, "0")}${sequence.toString(36).padStart(4, "0")}${INSTANCE}`;
}
