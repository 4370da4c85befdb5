/**
 * Re-renders bench/RESULTS.md from bench/results.json and bench/FINDINGS.md without measuring
 * again: `bun bench/render.ts` (after editing the findings, or the report's layout).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { type Results, renderMarkdown } from "./report";

const ROOT = new URL("..", import.meta.url).pathname;
const results = JSON.parse(readFileSync(`${ROOT}bench/results.json`, "utf8")) as Results;
const findingsPath = `${ROOT}bench/FINDINGS.md`;
const findings = existsSync(findingsPath) ? readFileSync(findingsPath, "utf8") : "";
writeFileSync(`${ROOT}bench/RESULTS.md`, renderMarkdown(results, findings));
console.log("wrote bench/RESULTS.md");
