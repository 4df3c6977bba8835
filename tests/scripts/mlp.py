"""A small, deterministic CPU training script used by the tests.

Usage: python mlp.py [--steps N] [--eval-every K] [--accum A] [--stall-at S --stall-s X]
       [--stall-every K] [--stall-cpu]
       [--sleep-before S] [--slow-data S] [--burn-data S] [--save PATH] [--fail-at N]
       [--workers W]
       [--slow-export S] [--step-sleep S [--pace-until PATH]] [--wait-for PATH]
``--slow-export`` makes the background export of every detailed profiling window take S
seconds more (under ``stepscope run`` only), as a many-module model's trace does.
``--burn-data`` makes each sample cost S seconds of the loading thread's CPU (a
decode), where ``--slow-data`` sleeps S seconds (slow storage).
``--stall-cpu`` makes a stall compute for ``--stall-s`` seconds of the thread's CPU time
instead of sleeping: beside busy processes it then waits for a core most of its time.
``--pace-until`` ends the ``--step-sleep`` pace once PATH exists: a test that waits on
something outside the training (a store's outage) lets the remaining steps run at once
(sleeps change no result).
``--wait-for`` writes PATH.ready before the first step, then waits until PATH exists, and
PATH.done after the last step: a test loads the machine during the steps only (beside
busy processes the job's start-up and end are slow, and buy the test nothing).
It prints one JSON line at the end with what it did, for the tests to compare.
"""

import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __init__(self, n: int, slow: float, burn: float = 0.0) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 32, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.slow, self.burn = slow, burn

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.slow:
            time.sleep(self.slow)
        done = time.thread_time() + self.burn
        while self.burn and time.thread_time() < done:
            pass
        return self.x[i], self.y[i]


def slow_exports(seconds: float) -> None:
    """Every detailed window's export, on the agent's background thread, sleeps first."""
    from stepscope.agent.profilers import _detailed

    stop = _detailed.DetailedProfiler.stop

    def slow_stop(self):
        finish = stop(self)

        def slow_finish(sink, base):
            time.sleep(seconds)
            return finish(sink, base)

        return slow_finish

    _detailed.DetailedProfiler.stop = slow_stop


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-batches", type=int, default=3)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--stall-at", type=int, default=-1)
    p.add_argument("--stall-s", type=float, default=0.0)
    p.add_argument("--stall-every", type=int, default=0)  # also stall steps K, 2K, ...
    p.add_argument("--stall-cpu", action="store_true")  # a stall computes, not sleeps
    p.add_argument("--sleep-before", type=float, default=0.0)
    p.add_argument("--sleep-after", type=float, default=0.0)
    p.add_argument("--slow-data", type=float, default=0.0)
    p.add_argument("--burn-data", type=float, default=0.0)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--pace-until", default="")
    p.add_argument("--wait-for", default="")
    p.add_argument("--fail-at", type=int, default=-1)
    p.add_argument("--save", default="")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--slow-export", type=float, default=0.0)
    a = p.parse_args()
    if a.slow_export:
        slow_exports(a.slow_export)
    if a.sleep_before:
        time.sleep(a.sleep_before)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    data = Data(512, a.slow_data, a.burn_data)
    loader = DataLoader(data, batch_size=16, shuffle=False, num_workers=a.workers)
    steps = evals = forwards = 0
    if a.wait_for:
        with open(a.wait_for + ".ready", "w"):
            pass
        while not os.path.exists(a.wait_for):
            time.sleep(0.05)
    while steps < a.steps:
        for i, (x, y) in enumerate(loader):
            model.train()
            loss = loss_fn(model(x), y) / a.accum
            forwards += 1
            loss.backward()
            if (i + 1) % a.accum:
                continue
            if steps == a.stall_at or (a.stall_every and steps and steps % a.stall_every == 0):
                if a.stall_cpu:
                    done = time.thread_time() + a.stall_s
                    while time.thread_time() < done:
                        pass
                else:
                    time.sleep(a.stall_s)
            if a.step_sleep and not (a.pace_until and os.path.exists(a.pace_until)):
                time.sleep(a.step_sleep)
            opt.step()
            opt.zero_grad()
            steps += 1
            if steps == a.fail_at:
                raise RuntimeError("injected failure")
            if a.eval_every and steps % a.eval_every == 0:
                model.eval()
                with torch.no_grad():
                    for j, (ex, _ey) in enumerate(loader):
                        if j == a.eval_batches:
                            break
                        model(ex)
                        evals += 1
            if steps >= a.steps:
                break
    if a.wait_for:
        with open(a.wait_for + ".done", "w"):
            pass
    if a.save:
        torch.save(model.state_dict(), a.save)
    if a.sleep_after:
        time.sleep(a.sleep_after)
    print(json.dumps({"steps": steps, "evals": evals, "forwards": forwards}))


if __name__ == "__main__":
    main()
