CREATE TABLE `etcd_snapshots` (
	`id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`machine_name` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`revision` text NOT NULL,
	`sha256` text NOT NULL,
	`trigger` text NOT NULL,
	`run_id` text,
	`sealed` text NOT NULL,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `etcd_snapshots_cluster` ON `etcd_snapshots` (`cluster_id`,`created_at`);