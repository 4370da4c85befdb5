/**
 * The master key. From GATEWAY_MASTER_KEY when set; otherwise generated on first start, its hash
 * stored, and the secret printed once. Several instances starting together agree on one key.
 */
import { eq } from "drizzle-orm";
import { generateSecret, hashSecret } from "../keys/secret";
import type { Db } from "../store/db";
import { gatewaySettings } from "../store/schema";

const SETTING = "master_key_hash";

export interface MasterKey {
  hash: string;
  /** The new secret, only on the start that generated it. */
  generated?: string;
}

export async function resolveMasterKey(db: Db, configured: string | undefined): Promise<MasterKey> {
  if (configured !== undefined) return { hash: hashSecret(configured) };
  const existing = await db.select().from(gatewaySettings).where(eq(gatewaySettings.name, SETTING));
  if (existing[0]) return { hash: existing[0].value };
  const secret = generateSecret();
  const inserted = await db
    .insert(gatewaySettings)
    .values({ name: SETTING, value: hashSecret(secret) })
    .onConflictDoNothing()
    .returning();
  if (inserted[0]) return { hash: inserted[0].value, generated: secret };
  // Another instance won the race; use its key.
  const winner = await db.select().from(gatewaySettings).where(eq(gatewaySettings.name, SETTING));
  if (!winner[0]) throw new Error("master key setting vanished during start");
  return { hash: winner[0].value };
}
