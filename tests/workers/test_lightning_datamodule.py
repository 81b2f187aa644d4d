"""labkit.workers.lightning_datamodule: Lightning trains on labkit's loaders, saves their place in its own
checkpoints, and a run resumed mid-epoch from one continues the epoch's order where it stood."""

import os

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

pl = pytest.importorskip("lightning.pytorch")

from labkit.workers.lightning_datamodule import LabkitDataModule  # noqa: E402


class Indexed(Dataset):
    """Sample i: a small image whose label is i, so the batches the model saw are known exactly."""

    def __len__(self):
        return 24

    def __getitem__(self, index):
        return torch.full((3, 4, 4), float(index)), int(index)


class Recorder(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net, self.seen = nn.Linear(48, 2), []

    def training_step(self, batch, _):
        images, labels = batch
        self.seen.append(labels.tolist())
        return self.net(images.flatten(1)).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _fit(tmp_path, max_steps, ckpt_path=None, every=None, workers=0):
    model = Recorder()
    callbacks = (
        [pl.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=every, save_top_k=-1)] if every else []
    )
    trainer = pl.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        callbacks=callbacks,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        enable_checkpointing=bool(every),
    )
    trainer.fit(model, LabkitDataModule(Indexed(), batch_size=4, num_workers=workers, seed=3), ckpt_path=ckpt_path)
    return model.seen


def test_a_run_resumed_mid_epoch_from_lightning_s_checkpoint_continues_the_order(tmp_path):
    whole = _fit(tmp_path / "whole", max_steps=9)  # 6 batches an epoch: 1.5 epochs
    assert sorted(i for batch in whole[:6] for i in batch) == list(range(24)) and whole[:6] != whole[6:] + whole[:3]
    first = _fit(tmp_path / "first", max_steps=4, every=4, workers=2)
    checkpoint = os.path.join(tmp_path / "first", sorted(os.listdir(tmp_path / "first"))[-1])
    assert "loops" in torch.load(checkpoint, weights_only=False)
    resumed = _fit(tmp_path / "second", max_steps=9, ckpt_path=checkpoint, workers=1)
    assert first + resumed == whole
