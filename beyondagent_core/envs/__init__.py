"""Ways to hand an `Env` to workflows and explorers as an `AsyncEnv` (`env.service`)."""
