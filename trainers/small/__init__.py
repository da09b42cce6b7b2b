"""The small learner: a few-hundred-thousand-parameter transformer trained by real GRPO on MAPF."""
