"""Task synthesis without an LLM: the `hindsight` summarizer, the `dedup` and `min_confidence` filters,
and the `feasibility` filter's machinery with its `replay` solver. The LLM-based parts (the `llm`
summarizer, the feasibility filter's `llm` solver) are `beyondagent-plugin-llm` (`plugins/llm`).
"""
