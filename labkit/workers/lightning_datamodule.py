"""labkit's loaders as a Lightning ``LightningDataModule`` (needs the optional ``lightning`` package).

``Trainer.fit(model, LabkitDataModule(train_set, val_set))``: the training loader is `make_loader`'s, a
random permutation per epoch (a `DistributedBlockSampler` split when the trainer runs more than one
process), whose `StatefulLoader` state Lightning saves in its checkpoints by itself (its fit loop keeps
the state of every loader that has ``state_dict``/``load_state_dict``) and gives back on
``fit(ckpt_path=...)``: a run resumed mid-epoch continues the epoch's order where the checkpoint stood,
with the same crops. Validation reads in order. Lightning moves the batches to the device.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from torch.utils.data import Dataset

from labkit.samplers.block_shuffle import DistributedBlockSampler
from labkit.workers.loader_factory import make_loader
from labkit.workers.stateful_loader import StatefulLoader


class LabkitDataModule(pl.LightningDataModule):
    """``train`` (and ``val``, if given) through `make_loader`; the other arguments are make_loader's."""

    def __init__(
        self,
        train: Dataset,
        val: Dataset | None = None,
        batch_size: int = 64,
        num_workers: int | None = None,
        seed: int = 0,
        **loader_options: Any,
    ) -> None:
        super().__init__()
        self.train, self.val = train, val
        self.batch_size, self.num_workers, self.seed, self.loader_options = (
            batch_size,
            num_workers,
            seed,
            loader_options,
        )

    def train_dataloader(self) -> StatefulLoader:
        world = self.trainer.world_size if self.trainer is not None else 1
        if world > 1:
            sampler = DistributedBlockSampler(
                self.train,
                num_replicas=world,
                rank=self.trainer.global_rank,  # type: ignore[union-attr]
                seed=self.seed,
                drop_last=True,
            )
            return make_loader(
                self.train,
                self.batch_size,
                sampler=sampler,
                num_workers=self.num_workers,
                drop_last=True,
                **self.loader_options,
            )
        return make_loader(
            self.train, self.batch_size, seed=self.seed, num_workers=self.num_workers, **self.loader_options
        )

    def val_dataloader(self) -> Any:
        if self.val is None:
            return []
        return make_loader(
            self.val, self.batch_size, shuffle=False, num_workers=self.num_workers, **self.loader_options
        )
