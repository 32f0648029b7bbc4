"""Task synthesis: summarizers that turn exploration trajectories into tasks, and task filters."""
