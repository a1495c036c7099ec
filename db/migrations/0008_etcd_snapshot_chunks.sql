CREATE TABLE `etcd_snapshot_chunks` (
	`snapshot_id` text NOT NULL,
	`seq` integer NOT NULL,
	`cluster_id` text NOT NULL,
	`sealed` text NOT NULL,
	PRIMARY KEY(`snapshot_id`, `seq`),
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `etcd_snapshot_chunks_cluster` ON `etcd_snapshot_chunks` (`cluster_id`);--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_etcd_snapshots` (
	`id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`machine_name` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`revision` text NOT NULL,
	`sha256` text NOT NULL,
	`trigger` text NOT NULL,
	`run_id` text,
	`sealed` text,
	`chunks` integer,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_etcd_snapshots`("id", "cluster_id", "created_at", "machine_name", "size_bytes", "revision", "sha256", "trigger", "run_id", "sealed") SELECT "id", "cluster_id", "created_at", "machine_name", "size_bytes", "revision", "sha256", "trigger", "run_id", "sealed" FROM `etcd_snapshots`;--> statement-breakpoint
DROP TABLE `etcd_snapshots`;--> statement-breakpoint
ALTER TABLE `__new_etcd_snapshots` RENAME TO `etcd_snapshots`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `etcd_snapshots_cluster` ON `etcd_snapshots` (`cluster_id`,`created_at`);