/**
 * A deployment's own `rpm`/`tpm`: requests and tokens per clock minute (fixed windows), counted in
 * this process. The router skips a deployment that used up its minute; tokens are known only after
 * a call, so the call that crosses `tpm` completes and the next ones go elsewhere. Several gateway
 * instances each allow the full rate (documented as per instance).
 */
import type { Deployment } from "../providers/types";

const MINUTE = 60_000;
/** Beyond this many counters, those of past minutes are dropped (wildcard deployments come and go). */
const PRUNE_AT = 4096;

interface Window {
  minute: number;
  requests: number;
  tokens: number;
}

export class DeploymentLimits {
  private readonly windows = new Map<string, Window>();

  /** ms until the deployment may take a request again; 0 when it is under its limits now. */
  blockedFor(d: Deployment, now: number): number {
    if (d.rpm === undefined && d.tpm === undefined) return 0;
    const w = this.windows.get(d.id);
    const minute = Math.floor(now / MINUTE);
    if (!w || w.minute !== minute) return 0;
    const full = (d.rpm !== undefined && w.requests >= d.rpm) || (d.tpm !== undefined && w.tokens >= d.tpm);
    return full ? (minute + 1) * MINUTE - now : 0;
  }

  /** Counts a request sent to the deployment. */
  request(d: Deployment, now: number): void {
    if (d.rpm !== undefined || d.tpm !== undefined) this.window(d, now).requests++;
  }

  /** Counts the tokens (input + output) a call to the deployment used. */
  tokens(d: Deployment, tokens: number, now: number): void {
    if (d.tpm !== undefined && tokens > 0) this.window(d, now).tokens += tokens;
  }

  private window(d: Deployment, now: number): Window {
    const minute = Math.floor(now / MINUTE);
    let w = this.windows.get(d.id);
    if (!w) {
      if (this.windows.size >= PRUNE_AT) this.prune(minute);
      w = { minute, requests: 0, tokens: 0 };
      this.windows.set(d.id, w);
    } else if (w.minute !== minute) {
      w.minute = minute;
      w.requests = 0;
      w.tokens = 0;
    }
    return w;
  }

  private prune(minute: number): void {
    for (const [id, w] of this.windows) if (w.minute !== minute) this.windows.delete(id);
  }
}
