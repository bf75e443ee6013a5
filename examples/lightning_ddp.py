"""The exdyna DDP hook under Lightning: 2 CPU processes over Gloo, a small MLP on synthetic data.

    python examples/lightning_ddp.py --steps 20 [--out DIR]

Lightning's DDPStrategy(ddp_comm_state=exdyna.ddp.State(...), ddp_comm_hook=exdyna.ddp.hook)
registers the hook on CUDA only (lightning 2.6; the State finds the process group, which fit()
makes, at the first bucket). On CPU, and on GPU alike, a callback registers it on the DDP model
when fit() starts, as here. Lightning starts the second process itself (it runs this script
again).
--out DIR: each rank saves its parameters and the State's counters to DIR/rank<r>.pt.
"""

import argparse
import os

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy

import exdyna.ddp


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                       torch.nn.Linear(128, 10))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class ExDynaHook(L.Callback):
    def on_fit_start(self, trainer, module):
        self.state = exdyna.ddp.State("exdyna", density=0.01)  # the process group exists now
        trainer.strategy.model.register_comm_hook(self.state, exdyna.ddp.hook)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()

    L.seed_everything(0, verbose=False)
    x = torch.randn(2048, 64)
    y = (x @ torch.randn(64, 10)).argmax(1)  # a learnable synthetic task
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)

    model, hook = Net(), ExDynaHook()
    trainer = L.Trainer(accelerator="cpu", devices=2, max_steps=args.steps, callbacks=[hook],
                        strategy=DDPStrategy(process_group_backend="gloo",
                                             gradient_as_bucket_view=True),
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(model, loader)  # Lightning adds a DistributedSampler: each rank its half

    state = hook.state
    if trainer.global_rank == 0:
        print(state.compression_stats())
    if args.out:
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        torch.save({"params": params, "world_size": state.stats[0]["world_size"],
                    "steps": state.steps, "k_total": state.k_total},
                   os.path.join(args.out, f"rank{trainer.global_rank}.pt"))


if __name__ == "__main__":
    main()
