CREATE TABLE `webhook_edge_secrets` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`secret_sealed` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE cascade
);
