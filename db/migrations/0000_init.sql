CREATE TABLE `audit` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` integer NOT NULL,
	`actor` text NOT NULL,
	`tenant_id` text,
	`action` text NOT NULL,
	`target` text NOT NULL,
	`detail` text
);
--> statement-breakpoint
CREATE INDEX `audit_tenant_at` ON `audit` (`tenant_id`,`at`);--> statement-breakpoint
CREATE TABLE `clusters` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`talos_version` text NOT NULL,
	`kubernetes_version` text NOT NULL,
	`endpoint` text NOT NULL,
	`settings` text NOT NULL,
	`secrets_sealed` text,
	`bootstrapped_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `clusters_tenant_name` ON `clusters` (`tenant_id`,`name`);--> statement-breakpoint
CREATE TABLE `machines` (
	`id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`name` text NOT NULL,
	`role` text NOT NULL,
	`provider` text NOT NULL,
	`address` text,
	`install_disk` text,
	`patches` text NOT NULL,
	`state` text NOT NULL,
	`talos_version` text,
	`ipv4` text,
	`ipv6` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `machines_cluster_name` ON `machines` (`cluster_id`,`name`);--> statement-breakpoint
CREATE TABLE `run_events` (
	`run_id` text NOT NULL,
	`seq` integer NOT NULL,
	`at` integer NOT NULL,
	`level` text NOT NULL,
	`type` text NOT NULL,
	`message` text NOT NULL,
	`data` text,
	PRIMARY KEY(`run_id`, `seq`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`tenant_id` text,
	`cluster_id` text,
	`exclusive` integer NOT NULL,
	`lock_key` text,
	`state` text NOT NULL,
	`params` text NOT NULL,
	`result` text,
	`error` text,
	`cancel_requested` integer DEFAULT false NOT NULL,
	`lease_owner` text,
	`lease_expires_at` integer,
	`attempt` integer DEFAULT 0 NOT NULL,
	`created_by` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer
);
--> statement-breakpoint
CREATE INDEX `runs_queue` ON `runs` (`state`,`created_at`);--> statement-breakpoint
CREATE INDEX `runs_cluster` ON `runs` (`cluster_id`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `runs_one_active_per_lock` ON `runs` (`lock_key`) WHERE "runs"."exclusive" = 1 AND "runs"."state" IN ('queued', 'running');--> statement-breakpoint
CREATE TABLE `tenants` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tenants_name_unique` ON `tenants` (`name`);--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text,
	`name` text NOT NULL,
	`hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` integer NOT NULL,
	`last_used_at` integer,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_hash_unique` ON `tokens` (`hash`);--> statement-breakpoint
CREATE INDEX `tokens_tenant` ON `tokens` (`tenant_id`);--> statement-breakpoint
CREATE TABLE `provider_credentials` (
	`tenant_id` text NOT NULL,
	`provider` text NOT NULL,
	`env_sealed` text NOT NULL,
	`names` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`tenant_id`, `provider`),
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `state_credentials` (
	`run_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`cluster_id` text NOT NULL,
	`hash` text NOT NULL,
	`expires_at` integer NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `state_credentials_expiry` ON `state_credentials` (`expires_at`);--> statement-breakpoint
CREATE TABLE `state_locks` (
	`cluster_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`lock_id` text NOT NULL,
	`info` text NOT NULL,
	`held_by` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `state_versions` (
	`tenant_id` text NOT NULL,
	`cluster_id` text NOT NULL,
	`version` integer NOT NULL,
	`serial` integer NOT NULL,
	`lineage` text NOT NULL,
	`body_sealed` text NOT NULL,
	`md5` text NOT NULL,
	`size` integer NOT NULL,
	`written_by` text,
	`created_at` integer NOT NULL,
	`deleted_at` integer,
	PRIMARY KEY(`cluster_id`, `version`),
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `state_versions_tenant` ON `state_versions` (`tenant_id`);--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`tenant_id` text NOT NULL,
	`delivery_id` text NOT NULL,
	`run_id` text,
	`received_at` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_deliveries_tenant_delivery` ON `webhook_deliveries` (`tenant_id`,`delivery_id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_received` ON `webhook_deliveries` (`received_at`);--> statement-breakpoint
CREATE TABLE `webhook_secrets` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`secret_sealed` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `provision_plans` (
	`run_id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`plan_sealed` text NOT NULL,
	`state_version` integer,
	`destroy` integer NOT NULL,
	`summary` text NOT NULL,
	`resources` text NOT NULL,
	`created_at` integer NOT NULL,
	`applied_by` text,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `provision_plans_cluster` ON `provision_plans` (`cluster_id`,`created_at`);