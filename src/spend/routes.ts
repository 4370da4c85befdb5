import { Elysia } from "elysia";
import type { AuthPlugin } from "../http/auth";
import { queryValidator } from "../http/validate";
import type { Db } from "../store/db";
import { SpendLogsQuery, SpendReportQuery } from "./model";
import { spendLogs, spendReport } from "./queries";

const parseLogs = queryValidator(SpendLogsQuery);
const parseReport = queryValidator(SpendReportQuery);

export function spendRoutes(db: Db, auth: AuthPlugin) {
  return new Elysia({ prefix: "/spend" })
    .use(auth)
    .get("/logs", async ({ query, principal }) => spendLogs(db, principal, parseLogs(query)), { auth: true })
    .get("/report", async ({ query, principal }) => spendReport(db, principal, parseReport(query)), { auth: true });
}
