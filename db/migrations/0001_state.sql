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
