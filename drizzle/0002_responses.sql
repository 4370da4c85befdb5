CREATE TABLE "responses" (
	"id" text PRIMARY KEY NOT NULL,
	"token_id" text,
	"model" text NOT NULL,
	"request_id" text,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"input" jsonb NOT NULL,
	"response" jsonb NOT NULL
);
--> statement-breakpoint
CREATE INDEX "responses_expires_idx" ON "responses" USING btree ("expires_at");