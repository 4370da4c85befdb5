/** Duration strings as the spec defines them: a positive whole number plus `s`, `m`, `h` or `d`. */
export const DURATION_PATTERN = "^[1-9][0-9]{0,8}[smhd]$";
const DURATION_RE = new RegExp(DURATION_PATTERN);

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * The longest duration accepted: 36500 days (about 100 years). The pattern alone allows
 * `999999999d`, which puts an expiry or budget reset past the largest date JavaScript and the
 * database can hold.
 */
export const MAX_DURATION_DAYS = 36_500;
export const MAX_DURATION_MS = MAX_DURATION_DAYS * 86_400_000;

/** A duration string the gateway accepts: the format, and no longer than MAX_DURATION_MS. */
export function isDuration(value: string): boolean {
  return DURATION_RE.test(value) && durationMs(value) <= MAX_DURATION_MS;
}

/** Milliseconds in a duration string; callers validate the format first. */
export function durationMs(value: string): number {
  if (!DURATION_RE.test(value)) throw new RangeError(`not a duration: ${value}`);
  const unit = value.slice(-1);
  return Number(value.slice(0, -1)) * (UNIT_MS[unit] as number);
}

export function addDuration(from: Date, value: string): Date {
  return new Date(from.getTime() + durationMs(value));
}
