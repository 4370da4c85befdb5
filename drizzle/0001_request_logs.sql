CREATE TABLE "request_logs" (
	"request_id" text PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"endpoint" text NOT NULL,
	"token_id" text,
	"key_hash" text,
	"team_id" text,
	"model" text NOT NULL,
	"requested_model" text NOT NULL,
	"provider" text,
	"deployment" text,
	"upstream_model" text,
	"stream" boolean DEFAULT false NOT NULL,
	"status" integer NOT NULL,
	"error_code" text,
	"input_tokens" integer DEFAULT 0 NOT NULL,
	"cache_read_tokens" integer DEFAULT 0 NOT NULL,
	"cache_write_tokens" integer DEFAULT 0 NOT NULL,
	"output_tokens" integer DEFAULT 0 NOT NULL,
	"reasoning_tokens" integer DEFAULT 0 NOT NULL,
	"usage_estimated" boolean DEFAULT false NOT NULL,
	"cost" double precision DEFAULT 0 NOT NULL,
	"cost_estimated" boolean DEFAULT false NOT NULL,
	"latency_ms" integer,
	"ttft_ms" integer,
	"attempts" integer DEFAULT 1 NOT NULL,
	"tags" jsonb DEFAULT '[]'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE INDEX "request_logs_created_idx" ON "request_logs" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "request_logs_token_created_idx" ON "request_logs" USING btree ("token_id","created_at");--> statement-breakpoint
CREATE INDEX "request_logs_team_created_idx" ON "request_logs" USING btree ("team_id","created_at");--> statement-breakpoint
CREATE INDEX "request_logs_model_created_idx" ON "request_logs" USING btree ("model","created_at");