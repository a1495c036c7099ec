CREATE TABLE `mesh_stun` (
	`id` text PRIMARY KEY NOT NULL,
	`mapping` text NOT NULL,
	`public_address` text,
	`endpoint` text,
	`observed` text NOT NULL,
	`checked_at` integer NOT NULL,
	`changed_at` integer
);
