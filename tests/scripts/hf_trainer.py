"""A Hugging Face Trainer run with gradient accumulation and evaluation (no download)."""

import json
import sys
import tempfile

import torch
from torch import nn
from transformers import Trainer, TrainingArguments


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x, labels=None):
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "logits": logits}


class Data(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def main() -> None:
    max_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            max_steps=max_steps,
            gradient_accumulation_steps=2,
            per_device_train_batch_size=4,
            per_device_eval_batch_size=4,
            eval_strategy="steps",
            eval_steps=4,
            logging_steps=1000,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        trainer = Trainer(model=Tiny(), args=args, train_dataset=Data(64), eval_dataset=Data(12))
        trainer.train()
        print(json.dumps({"global_step": trainer.state.global_step}))


if __name__ == "__main__":
    main()
