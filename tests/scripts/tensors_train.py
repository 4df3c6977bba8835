"""A small CPU training script for the tensor and debugging-rule tests.

Usage: python tensors_train.py [--model mlp|sigmoid|deadrelu|wide] [--task classify|regress]
       [--lr LR] [--steps N] [--n-data N] [--random-labels] [--eval-every K]
       [--eval-batches B] [--accum A] [--freeze-first] [--shared] [--amp-like]
       [--record PATH --record-steps 0,5] [--scalars]
The script records, itself, what the model had: the loss of every step, the
evaluation losses, and at --record-steps every weight and gradient just before
``optimizer.step()``; it saves them to PATH (torch.save) for the tests to compare
with what stepscope captured. It prints one JSON line at the end.
"""

import argparse
import json
import time

import torch
from torch import nn


def build(a: argparse.Namespace) -> nn.Module:
    if a.model == "sigmoid":  # gradients vanish through many saturating layers
        layers: list[nn.Module] = []
        for _ in range(a.depth):
            layers += [nn.Linear(32, 32), nn.Sigmoid()]
        return nn.Sequential(*layers, nn.Linear(32, 2))
    if a.model == "deadrelu":  # biases so negative that no unit ever fires
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
        with torch.no_grad():
            model[0].bias.fill_(-100.0)
        return model
    if a.model == "wide":
        return nn.Sequential(
            nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2)
        )
    if a.shared:  # one module used twice: its parameters appear once
        hidden = nn.Linear(64, 64)
        return nn.Sequential(
            nn.Linear(32, 64), nn.ReLU(), hidden, nn.ReLU(), hidden, nn.ReLU(), nn.Linear(64, 2)
        )
    return nn.Sequential(
        nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)
    )


def data(a: argparse.Namespace, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(a.n_data, 32, generator=g)
    if a.task == "regress":
        return x, x.sum(1, keepdim=True).repeat(1, 2)
    if a.random_labels:
        return x, torch.randint(0, 2, (a.n_data,), generator=g)
    return x, (x.sum(1) > 0).long()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--task", default="classify")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--n-data", type=int, default=512)
    p.add_argument("--random-labels", action="store_true")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-batches", type=int, default=2)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--freeze-first", action="store_true")
    p.add_argument("--shared", action="store_true")
    p.add_argument("--adam", action="store_true")
    p.add_argument("--scalars", action="store_true")
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--record", default="")
    p.add_argument("--record-steps", default="")
    return p.parse_args()


def main() -> None:
    a = parse()
    torch.manual_seed(0)
    model = build(a)
    if a.freeze_first:
        for p in model[0].parameters():
            p.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=a.lr) if a.adam else torch.optim.SGD(params, lr=a.lr)
    loss_fn = nn.MSELoss() if a.task == "regress" else nn.CrossEntropyLoss()
    x, y = data(a, 0)
    ex, ey = data(a, 1)
    record_steps = {int(s) for s in a.record_steps.split(",") if s}
    rec: dict = {"loss": [], "eval_loss": [], "weights": {}, "grads": {}, "scalars": []}
    step = batch = 0
    while step < a.steps:
        i = (batch * a.batch) % a.n_data
        batch += 1
        model.train()
        loss = loss_fn(model(x[i : i + a.batch]), y[i : i + a.batch]) / a.accum
        loss.backward()
        rec.setdefault("micro", []).append(loss.item())
        if batch % a.accum:
            continue
        rec["loss"].append(sum(rec.pop("micro")))
        if step in record_steps:
            for name, p in model.named_parameters():
                rec["weights"][(name, step)] = p.detach().clone()
                if p.grad is not None:
                    rec["grads"][(name, step)] = p.grad.detach().clone()
        opt.step()
        opt.zero_grad()
        if a.step_sleep:
            time.sleep(a.step_sleep)
        if a.scalars:
            import stepscope

            acc = float(step) / 100.0
            stepscope.record_scalar("accuracy", acc)
            rec["scalars"].append(acc)
        step += 1
        if a.eval_every and step % a.eval_every == 0:
            model.eval()
            with torch.no_grad():
                for j in range(a.eval_batches):
                    k = (j * a.batch) % a.n_data
                    rec["eval_loss"].append(
                        loss_fn(model(ex[k : k + a.batch]), ey[k : k + a.batch]).item()
                    )
    if a.record:
        torch.save(rec, a.record)
    print(json.dumps({"steps": step, "evals": len(rec["eval_loss"]), "last_loss": rec["loss"][-1]}))


if __name__ == "__main__":
    main()
