CREATE TABLE `cluster_health` (
	`cluster_id` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`reasons` text NOT NULL,
	`checked_at` integer NOT NULL,
	`kubernetes_version` text,
	`talos_versions` text NOT NULL,
	`etcd` text,
	`kube_error` text,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `health_hourly` (
	`machine_id` text NOT NULL,
	`metric` text NOT NULL,
	`hour` integer NOT NULL,
	`avg` real NOT NULL,
	`min` real NOT NULL,
	`max` real NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`machine_id`, `metric`, `hour`),
	FOREIGN KEY (`machine_id`) REFERENCES `machines`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `health_hourly_hour` ON `health_hourly` (`hour`);--> statement-breakpoint
CREATE TABLE `health_samples` (
	`machine_id` text NOT NULL,
	`metric` text NOT NULL,
	`ts` integer NOT NULL,
	`value` real NOT NULL,
	PRIMARY KEY(`machine_id`, `metric`, `ts`),
	FOREIGN KEY (`machine_id`) REFERENCES `machines`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `health_samples_ts` ON `health_samples` (`ts`);--> statement-breakpoint
CREATE TABLE `machine_health` (
	`machine_id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`state` text NOT NULL,
	`reasons` text NOT NULL,
	`checked_at` integer NOT NULL,
	`last_seen_at` integer,
	`talos_version` text,
	`kubernetes_version` text,
	`last_error` text,
	`latest` text NOT NULL,
	`previous_cpu` text,
	FOREIGN KEY (`machine_id`) REFERENCES `machines`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `machine_health_cluster` ON `machine_health` (`cluster_id`);