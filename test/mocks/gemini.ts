/**
 * Gemini (Google AI and Vertex AI) mock responses built from the recorded-shape fixtures, plus a
 * throwaway service account and an OAuth token endpoint for Vertex.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type MockHandler, type MockUpstream, streamResponse } from "./upstream";

const GEMINI_FIXTURES = join(import.meta.dir, "../../src/providers/gemini/fixtures");
const VERTEX_FIXTURES = join(import.meta.dir, "../../src/providers/vertex/fixtures");

export const geminiFixture = (name: string): string => readFileSync(join(GEMINI_FIXTURES, name), "utf8");
export const vertexFixture = (name: string): string => readFileSync(join(VERTEX_FIXTURES, name), "utf8");

const JSON_HEADERS = {
  "content-type": "application/json; charset=UTF-8",
  vary: "Origin, X-Origin, Referer",
  "server-timing": "gfet4t7; dur=812",
  "x-content-type-options": "nosniff",
};

const json = (text: string, status = 200, headers: Record<string, string> = {}) =>
  new Response(text, { status, headers: { ...JSON_HEADERS, ...headers } });

export const geminiJson = (name: string, status = 200) => json(geminiFixture(name), status);
export const vertexJson = (name: string, status = 200) => json(vertexFixture(name), status);

/** SSE frames of a fixture, split on blank lines (CRLF or LF), each written separately. */
export function sseFrames(text: string): string[] {
  const sep = text.includes("\r\n\r\n") ? "\r\n\r\n" : "\n\n";
  return text
    .split(sep)
    .filter((f) => f.trim() !== "")
    .map((f) => `${f}${sep}`);
}

export const geminiStream = (name: string, delayMs = 0) =>
  streamResponse(sseFrames(geminiFixture(name)), { delayMs, contentType: "text/event-stream" });
export const vertexStream = (name: string, delayMs = 0) =>
  streamResponse(sseFrames(vertexFixture(name)), { delayMs, contentType: "text/event-stream" });

/** Google's RPC error envelope. */
export const googleError = (
  status: number,
  message: string,
  statusName: string,
  details: Record<string, unknown>[] = [],
  headers: Record<string, string> = {},
) =>
  json(
    JSON.stringify({ error: { code: status, message, status: statusName, ...(details.length ? { details } : {}) } }),
    status,
    headers,
  );

export interface GeminiMockUsage {
  prompt: number;
  candidates: number;
  cached?: number;
  thoughts?: number;
}

/** A one-candidate text answer with the given usage (for cost arithmetic). */
export function geminiText(text: string, usage: GeminiMockUsage, modelVersion = "gemini-2.5-flash"): Response {
  return Response.json({
    candidates: [
      {
        content: { parts: [{ text }], role: "model" },
        finishReason: "STOP",
        index: 0,
        safetyRatings: [{ category: "HARM_CATEGORY_HARASSMENT", probability: "NEGLIGIBLE" }],
      },
    ],
    usageMetadata: {
      promptTokenCount: usage.prompt,
      candidatesTokenCount: usage.candidates,
      totalTokenCount: usage.prompt + usage.candidates + (usage.thoughts ?? 0),
      ...(usage.cached ? { cachedContentTokenCount: usage.cached } : {}),
      ...(usage.thoughts ? { thoughtsTokenCount: usage.thoughts } : {}),
      promptTokensDetails: [{ modality: "TEXT", tokenCount: usage.prompt }],
    },
    modelVersion,
    responseId: `resp-${crypto.randomUUID().slice(0, 12)}`,
  });
}

export interface TestServiceAccount {
  /** The key file's JSON text. */
  json: string;
  clientEmail: string;
  privateKeyPem: string;
  publicKey: KeyObject;
}

let keyPair: { privateKey: KeyObject; publicKey: KeyObject } | undefined;

/** A service-account key (real RSA pair, generated once per process) whose token_uri is `tokenUri`. */
export function testServiceAccount(tokenUri: string, projectId = "gw-test-project"): TestServiceAccount {
  keyPair ??= generateKeyPairSync("rsa", { modulusLength: 2048 });
  const privateKeyPem = keyPair.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const clientEmail = `gateway@${projectId}.iam.gserviceaccount.com`;
  const json = JSON.stringify({
    type: "service_account",
    project_id: projectId,
    private_key_id: "4f1c2d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d",
    private_key: privateKeyPem,
    client_email: clientEmail,
    client_id: "109876543210987654321",
    auth_uri: "https://accounts.google.com/o/oauth2/auth",
    token_uri: tokenUri,
    auth_provider_x509_cert_url: "https://www.googleapis.com/oauth2/v1/certs",
    client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/gateway%40${projectId}.iam.gserviceaccount.com`,
    universe_domain: "googleapis.com",
  });
  return { json, clientEmail, privateKeyPem, publicKey: keyPair.publicKey };
}

let tokenCounter = 0;

/** A token endpoint answer; each call mints a distinct token unless one is given. */
export const tokenResponse =
  (opts: { token?: string; expiresIn?: number } = {}): MockHandler =>
  () =>
    Response.json({
      access_token: opts.token ?? `ya29.mock-access-token-${++tokenCounter}`,
      expires_in: opts.expiresIn ?? 3599,
      token_type: "Bearer",
    });

/** The assertion a token request carried, split into its parts. */
export function assertionOf(mock: MockUpstream, i: number): { header: unknown; claims: unknown; raw: string } {
  const raw = new URLSearchParams(mock.requests[i]?.text ?? "").get("assertion") ?? "";
  const [h, c] = raw.split(".");
  return {
    header: JSON.parse(Buffer.from(h ?? "", "base64url").toString() || "null"),
    claims: JSON.parse(Buffer.from(c ?? "", "base64url").toString() || "null"),
    raw,
  };
}
