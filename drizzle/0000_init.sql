CREATE TABLE "api_keys" (
	"token_id" text PRIMARY KEY NOT NULL,
	"key_hash" text NOT NULL,
	"key_name" text NOT NULL,
	"key_alias" text,
	"key_type" text DEFAULT 'llm_api' NOT NULL,
	"team_id" text NOT NULL,
	"user_id" text,
	"models" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"spend" double precision DEFAULT 0 NOT NULL,
	"max_budget" double precision,
	"soft_budget" double precision,
	"budget_duration" text,
	"budget_reset_at" timestamp with time zone,
	"expires" timestamp with time zone,
	"rpm_limit" integer,
	"tpm_limit" integer,
	"max_parallel_requests" integer,
	"model_max_budget" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"model_rpm_limit" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"model_tpm_limit" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"tags" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"blocked" boolean DEFAULT false NOT NULL,
	"created_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "gateway_settings" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "teams" (
	"team_id" text PRIMARY KEY NOT NULL,
	"team_alias" text,
	"models" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"spend" double precision DEFAULT 0 NOT NULL,
	"max_budget" double precision,
	"budget_duration" text,
	"budget_reset_at" timestamp with time zone,
	"rpm_limit" integer,
	"tpm_limit" integer,
	"max_parallel_requests" integer,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"blocked" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_team_id_teams_team_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("team_id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_key_hash_idx" ON "api_keys" USING btree ("key_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_key_alias_idx" ON "api_keys" USING btree ("key_alias");--> statement-breakpoint
CREATE INDEX "api_keys_team_created_idx" ON "api_keys" USING btree ("team_id","created_at");--> statement-breakpoint
CREATE INDEX "api_keys_user_idx" ON "api_keys" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "api_keys_created_idx" ON "api_keys" USING btree ("created_at");