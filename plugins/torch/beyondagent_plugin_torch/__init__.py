"""BeyondAgent's in-process GRPO backend (`torch`): any transformers causal LM, CPU or one GPU."""
