"""The exdyna DDP hook under Accelerate: 2 CPU processes over Gloo, a small MLP on synthetic data.

    torchrun --standalone --nproc_per_node 2 examples/accelerate_ddp.py --steps 20 [--out DIR]

(`accelerate launch --cpu` starts one process; Accelerate's multi-CPU route is torchrun or mpirun.)

accelerator.prepare() wraps the model in DistributedDataParallel; the hook is registered on that
wrapper, before the first backward. --out DIR: each rank saves its parameters and the State's
counters to DIR/rank<r>.pt.
"""

import argparse
import os

import torch
from accelerate import Accelerator, DistributedDataParallelKwargs

import exdyna.ddp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=True, kwargs_handlers=[
        DistributedDataParallelKwargs(gradient_as_bucket_view=True)])  # joins the Gloo group
    torch.manual_seed(0)
    x = torch.randn(2048, 64)
    y = (x @ torch.randn(64, 10)).argmax(1)  # a learnable synthetic task
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = accelerator.prepare(model, opt, loader)  # loader: each rank its half

    state = exdyna.ddp.State("exdyna", density=0.01)
    model.register_comm_hook(state, exdyna.ddp.hook)

    step = 0
    while step < args.steps:  # epochs of 32 batches per rank
        for x, y in loader:
            opt.zero_grad()
            accelerator.backward(torch.nn.functional.cross_entropy(model(x), y))
            opt.step()
            step += 1
            if step == args.steps:
                break

    accelerator.print(state.compression_stats())
    if args.out:
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        torch.save({"params": params, "world_size": state.stats[0]["world_size"],
                    "steps": state.steps, "k_total": state.k_total},
                   os.path.join(args.out, f"rank{accelerator.process_index}.pt"))


if __name__ == "__main__":
    main()
