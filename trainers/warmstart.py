"""Optional warm start: supervised fine-tuning on reference answers before GRPO round 0.

Small models often never produce a parsable MAPF plan, so every GRPO reward is 0 and nothing is
learned. With ``trainer.warmstart_steps > 0`` the policy first imitates the testbed's reference
answers (MAPF: the optimal CBS plan in the canonical format) through TRL's ``SFTTrainer``:

    L_SFT = - mean over completion tokens of log pi(y_t | prompt, y_<t)

(prompt tokens are masked: ``completion_only_loss``). Off by default: the paper starts GRPO
from the base model.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from testbeds.base import Task, Testbed


def sft_examples(testbed: Testbed, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """Prompt/completion pairs for the tasks that have a reference answer."""
    examples = []
    for task in tasks:
        answer = testbed.reference_answer(task)
        if answer is not None:
            examples.append({"prompt": task.messages,
                             "completion": [{"role": "assistant", "content": answer}]})
    return examples


def warm_start(model: Any, tokenizer: Any, testbed: Testbed, tasks: Sequence[Task], *, steps: int,
               learning_rate: float, batch_size: int, seed: int) -> dict[str, float]:
    """Run ``steps`` SFT updates on reference answers; returns TRL's training metrics."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    examples = sft_examples(testbed, tasks)
    if not examples:
        raise ValueError(f"testbed {testbed.name!r} provides no reference answers; set trainer.warmstart_steps=0")
    with tempfile.TemporaryDirectory(prefix="curriculum-sft-") as scratch:
        args = SFTConfig(output_dir=scratch, max_steps=steps, learning_rate=learning_rate,
                         per_device_train_batch_size=batch_size, lr_scheduler_type="constant",
                         completion_only_loss=True, report_to="none", save_strategy="no",
                         logging_steps=max(1, steps // 5), seed=seed, disable_tqdm=True,
                         use_cpu=not _cuda())
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(examples),
                             processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)
        result = trainer.train()
    return {"warmstart/steps": float(steps), "warmstart/loss": float(result.training_loss),
            "warmstart/examples": float(len(examples))}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
