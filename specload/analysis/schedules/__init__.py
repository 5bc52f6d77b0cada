"""vLLM's batch-size speculation schedules: its rules, the schedule a comparison proposes, and
whether a scheduled run delivered the better of both conditions."""
