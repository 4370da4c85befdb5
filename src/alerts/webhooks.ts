/**
 * Alert delivery: every event is logged, then POSTed as JSON to each configured webhook in the
 * background (never on a request's path), retried with exponential backoff on network errors,
 * 408, 429 and 5xx. With a secret, the body is signed: `x-gateway-timestamp: <unix seconds>` and
 * `x-gateway-signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
 */
import { createHmac } from "node:crypto";
import type { Logger } from "../log";

export interface WebhookTarget {
  url: string;
  secret?: string;
  headers?: Record<string, string>;
}

export interface SoftBudgetEvent {
  type: "soft_budget_crossed";
  event_id: string;
  time: string;
  key: { token_id: string; key_alias: string | null; key_name: string };
  team: { team_id: string; team_alias: string | null };
  spend: number;
  soft_budget: number;
  max_budget: number | null;
  /** End of the budget window this alert belongs to; null when the budget never resets. */
  window_ends_at: string | null;
}

export type AlertEvent = SoftBudgetEvent;

export interface AlertOptions {
  maxAttempts: number;
  backoffMs: number;
  timeoutMs: number;
}

export const ALERT_DEFAULTS: AlertOptions = { maxAttempts: 5, backoffMs: 1000, timeoutMs: 10_000 };

export function signature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

export class AlertDispatcher {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly targets: readonly WebhookTarget[],
    private readonly log: Logger,
    private readonly opts: AlertOptions = ALERT_DEFAULTS,
    private readonly sleep: (ms: number) => Promise<void> = Bun.sleep,
  ) {}

  emit(event: AlertEvent): void {
    this.log.warn("alert", {
      type: event.type,
      event_id: event.event_id,
      token_id: event.key.token_id,
      key_alias: event.key.key_alias,
      team_id: event.team.team_id,
      spend: event.spend,
      soft_budget: event.soft_budget,
      max_budget: event.max_budget,
    });
    const body = JSON.stringify(event);
    for (const t of this.targets) {
      const p = this.deliver(t, body, event.event_id).finally(() => this.pending.delete(p));
      this.pending.add(p);
    }
  }

  /** Waits for deliveries in progress (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  private async deliver(t: WebhookTarget, body: string, eventId: string): Promise<void> {
    const host = safeHost(t.url);
    for (let attempt = 1; attempt <= this.opts.maxAttempts; attempt++) {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers: Record<string, string> = {
        "content-type": "application/json",
        "user-agent": "llm-gateway-alerts",
        "x-gateway-event-id": eventId,
        ...t.headers,
      };
      if (t.secret) {
        headers["x-gateway-timestamp"] = timestamp;
        headers["x-gateway-signature"] = signature(t.secret, timestamp, body);
      }
      let retry = true;
      try {
        const res = await fetch(t.url, {
          method: "POST",
          headers,
          body,
          signal: AbortSignal.timeout(this.opts.timeoutMs),
        });
        await res.body?.cancel();
        if (res.ok) return;
        retry = res.status === 408 || res.status === 429 || res.status >= 500;
        this.log.warn("alert webhook refused", { host, status: res.status, attempt, event_id: eventId });
      } catch (e) {
        this.log.warn("alert webhook unreachable", { host, attempt, event_id: eventId, error: (e as Error).message });
      }
      if (!retry || attempt === this.opts.maxAttempts) break;
      await this.sleep(this.opts.backoffMs * 2 ** (attempt - 1));
    }
    this.log.error("alert webhook delivery failed", { host, event_id: eventId });
  }
}

/** Only the host reaches logs: webhook URLs often carry tokens in their path or query. */
function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "invalid-url";
  }
}
