CREATE TABLE `mesh_clusters` (
	`cluster_id` text PRIMARY KEY NOT NULL,
	`endpoint_source` text NOT NULL,
	`endpoint` text,
	`relay` text,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `mesh_hub` (
	`id` text PRIMARY KEY NOT NULL,
	`interface_name` text NOT NULL,
	`listen_port` integer NOT NULL,
	`private_key_sealed` text NOT NULL,
	`public_key` text NOT NULL,
	`ipv4_prefix` text NOT NULL,
	`ipv6_prefix` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `mesh_peers` (
	`machine_id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`host_index` integer NOT NULL,
	`private_key_sealed` text NOT NULL,
	`public_key` text NOT NULL,
	`delivered_endpoint` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`machine_id`) REFERENCES `machines`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `mesh_peers_host_index` ON `mesh_peers` (`host_index`);--> statement-breakpoint
CREATE UNIQUE INDEX `mesh_peers_public_key` ON `mesh_peers` (`public_key`);