CREATE TABLE `ended_sessions` (
	`sid` text PRIMARY KEY NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `ended_sessions_expires` ON `ended_sessions` (`expires_at`);