"""One training run from a TrainConfig into an output directory: resumable, reproducible, optionally under torchrun.

Reproducibility across a kill and resume rests on three things: the checkpoint holds every piece of state that
changes during an epoch (weights, optimiser, scheduler, the HOT layers' rounding step counters as module extra
state, the RNG states), the shuffling and worker seeds are a function of (seed, epoch) alone, and the stochastic
rounding in HOT is a hash of (seed, layer, step, rank), not an RNG draw.

SIGTERM (SLURM, ``kill``, torchrun passing on its own) or SIGINT during training stops the run after the optimizer
step in progress, with a checkpoint of that point: the epoch, the batches done in it and their loss sums. A resume
rebuilds that epoch's loader (same order), loads and discards the batches done, and goes on with the next one, so
that an interrupted and resumed run ends with the same weights and metrics as an uninterrupted one.

The output directory (its files, its lock, reading a checkpoint back) is :mod:`hot.train.outdir`; the
determinism switches and RNG states are :mod:`hot.train.reproducibility`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import random
import resource
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler
from tqdm import tqdm

from .. import lqs
from ..convert import hot_layers, set_config, state_dict_for_plain
from ..gpu_slots import steps_alone, steps_alone_requested
from ..results import environment, remove_stale_temporaries, write_atomic, write_json_atomic
from .config import TrainConfig
from .data import BatchLoader, build_datasets, dataset_info
from .distributed import Distributed
from .models import build_model, default_image_size
from .outdir import CHECKPOINT, LQS, METRICS, MODEL, NOT_BEGUN, EpochSoFar, out_locked, read_checkpoint, remove_results
from .progress import Progress, progress_mode
from .reproducibility import determinism, epoch_seed, rng_kept, rng_state, set_rng_state
from .stopping import STOP_SIGNALS, Stopped, StopRequest

WARMUP_BITS = 8


class NonFiniteError(FloatingPointError):
    """A loss or gradient became NaN or Inf."""


def train(config: TrainConfig, out: str | os.PathLike, resume: bool | None = None) -> dict[str, Any]:
    """Train as ``config`` says, writing into ``out``; returns the metrics (also written to metrics.json).

    ``resume``: None resumes when ``out`` holds a checkpoint, True the same, False starts afresh. Under torchrun
    (WORLD_SIZE > 1) every process calls this; rank 0 writes the files. SIGTERM or SIGINT while training raises
    :class:`Stopped` (a SystemExit, code 143 or 130) after checkpointing the step it stopped at.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    own_group = world > 1 and not dist.is_initialized()
    if own_group:
        backend = "nccl" if config.device != "cpu" and torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    env = os.environ
    place = Distributed(
        int(env.get("RANK", "0")), world, int(env.get("LOCAL_RANK", "0")), int(env.get("LOCAL_WORLD_SIZE", "1"))
    )
    try:
        with determinism(config.deterministic):
            return _Run(config, Path(out), place).run(resume is not False)
    finally:
        if own_group:
            dist.destroy_process_group()


class _Run:
    def __init__(self, config: TrainConfig, out: Path, place: Distributed) -> None:
        self.config, self.out, self.place = config, out, place
        self.device = self._device()
        self.hot_config = config.hot_config()
        place.check_same("HOT config", self._hot_settings())
        if config.batch_size % place.world:
            raise ValueError(f"batch_size {config.batch_size} must divide by the number of processes {place.world}")
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed)

        self.num_classes, in_chans = dataset_info(config.dataset, config.data_dir, config.synthetic)
        if config.classes is not None:
            self.num_classes = len(config.classes)
        self.net = build_model(config, self.num_classes, in_chans).to(self.device)
        self.image_size = config.image_size or default_image_size(self.net)
        self.train_set, self.test_set = build_datasets(
            config.dataset,
            config.data_dir,
            self.image_size,
            config.classes,
            config.train_subset,
            config.test_subset,
            config.seed,
            config.synthetic,
        )
        if place.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model: nn.Module = nn.parallel.DistributedDataParallel(self.net, device_ids=ids)
        else:
            self.model = self.net
        if config.torch_compile != "none":  # training steps only; evaluation and checkpoints use self.net
            self.model = torch.compile(self.model, backend=config.torch_compile)
        self.params = [(n, p) for n, p in self.net.named_parameters() if p.requires_grad]
        self.optimizer = self._optimizer()
        self.scheduler = self._scheduler()
        self.mixup = self._mixup()
        self.criterion = self._criterion()
        self.per_epoch = len(self._train_loader(0))  # the same every epoch
        self.batches = min(self.per_epoch, config.max_train_batches or self.per_epoch)
        self.progress = progress_mode(place.main)
        self.stop = StopRequest()
        self.history: list[dict[str, Any]] = []
        self.start_epoch, self.wall_before, self.peak_before = 0, 0.0, 0
        self.resumed = NOT_BEGUN  # of epoch start_epoch
        self.started = time.perf_counter()

    # --- setup -------------------------------------------------------------------------------------------------

    def _device(self) -> torch.device:
        want = self.config.device
        if want == "cuda" and not torch.cuda.is_available():
            raise ValueError("device: 'cuda' was asked for but torch sees no CUDA device (auto or cpu runs here)")
        if want == "cpu" or not torch.cuda.is_available():
            return torch.device("cpu")
        asked, visible = max(self.place.local_world, self.place.local_rank + 1), torch.cuda.device_count()
        if asked > visible:
            raise ValueError(
                f"{asked} processes on this machine need a GPU each, but torch sees {visible} GPU(s) "
                "(torchrun --nproc_per_node must not exceed it)"
            )
        torch.cuda.set_device(self.place.local_rank)
        torch.cuda.reset_peak_memory_stats()
        return torch.device("cuda", self.place.local_rank)

    def _hot_settings(self) -> dict[str, Any]:
        """The run's method, excluded layers and HOT layers' config, by the keys a config file gives them."""
        fields = {} if self.hot_config is None else self.hot_config.to_dict()
        hot = {f"hot.{k}": v for k, v in fields.items()}
        return {"method": self.config.method, "exclude": list(self.config.exclude), **hot}

    def _optimizer(self) -> torch.optim.Optimizer:
        c, params = self.config, [p for _, p in self.params]
        if not params:
            raise ValueError("the model has no trainable parameter")
        if c.optimizer == "sgd":
            return torch.optim.SGD(params, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay)
        return torch.optim.AdamW(params, lr=c.lr, eps=c.eps, weight_decay=c.weight_decay)

    def _scheduler(self) -> torch.optim.lr_scheduler.LRScheduler:
        c, sched = self.config, torch.optim.lr_scheduler
        args = dict(c.scheduler_args)
        try:
            if c.scheduler == "cosine":
                return sched.CosineAnnealingLR(self.optimizer, T_max=c.epochs, **args)
            if c.scheduler == "cosine_restarts":
                return sched.CosineAnnealingWarmRestarts(self.optimizer, **args)
            if c.scheduler == "multistep":
                args.setdefault("milestones", [c.epochs // 2, c.epochs * 3 // 4])
                return sched.MultiStepLR(self.optimizer, **args)
            return sched.ConstantLR(self.optimizer, factor=1.0, total_iters=0, **args)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"scheduler_args {c.scheduler_args!r} do not fit scheduler {c.scheduler!r}: {err}"
            ) from None

    def _mixup(self) -> Any:
        c = self.config
        if c.mixup == 0 and c.cutmix == 0:
            return None
        from timm.data import Mixup

        return Mixup(
            mixup_alpha=c.mixup, cutmix_alpha=c.cutmix, label_smoothing=c.label_smoothing, num_classes=self.num_classes
        )

    def _criterion(self) -> nn.Module:
        if self.mixup is not None:  # mixup makes soft targets (label smoothing included)
            from timm.loss import SoftTargetCrossEntropy

            return SoftTargetCrossEntropy()
        return nn.CrossEntropyLoss(label_smoothing=self.config.label_smoothing)

    def _train_loader(self, epoch: int) -> DataLoader | BatchLoader:
        c, place = self.config, self.place
        generator = torch.Generator().manual_seed(epoch_seed(c.seed, epoch))
        if place.world > 1:
            sampler = DistributedSampler(self.train_set, place.world, place.rank, shuffle=True, seed=c.seed)
            sampler.set_epoch(epoch)
        else:
            sampler = RandomSampler(self.train_set, generator=generator)
        # drop_last: mixup pairs samples
        batches = BatchSampler(sampler, c.batch_size // place.world, drop_last=self.mixup is not None)
        loader = self._loader(self.train_set, batches, generator)
        if len(loader) == 0:
            raise ValueError(
                f"no training batch: {len(self.train_set)} samples, batch_size {c.batch_size} (mixup drops "
                "the last partial batch)"
            )
        return loader

    def _test_loader(self) -> DataLoader | BatchLoader:
        rank, world = self.place.rank, self.place.world
        shard = list(range(rank, len(self.test_set), world))
        return self._loader(self.test_set, BatchSampler(shard, self.config.batch_size // world, drop_last=False))

    def _loader(
        self, data: Any, batches: BatchSampler, generator: torch.Generator | None = None
    ) -> DataLoader | BatchLoader:
        # Datasets held in memory make whole batches in-process (the same samples, order and values as the
        # DataLoader's); the others load per sample, in workers if asked.
        if self.config.num_workers == 0 and getattr(data, "batched", False):
            return BatchLoader(data, batches, generator)
        return DataLoader(
            data,
            batch_sampler=batches,
            generator=generator,
            num_workers=self.config.num_workers,
            pin_memory=self.device.type == "cuda",
        )

    # --- checkpoint --------------------------------------------------------------------------------------------

    def _resume(self) -> None:
        path = self.out / CHECKPOINT
        saved = read_checkpoint(path, self.config)
        self.net.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        set_rng_state(saved["rng"])
        self.history, self.start_epoch = list(saved["history"]), int(saved["epoch"])
        self.wall_before, self.peak_before = float(saved["wall_time_s"]), int(saved["peak_memory_bytes"])
        if self.hot_config is not None and self.hot_config.lqs and (self.out / LQS).is_file():
            lqs.load_decisions(self.net, self.out / LQS)
        part = saved.get("in_epoch")  # checkpoints written before mid-epoch stops existed have none
        if part is not None:
            if part["world"] != self.place.world:
                raise ValueError(
                    f"{path} was written mid-epoch by {part['world']} process(es); resume it with as many (each "
                    f"process's share of the epoch's batches depends on their number), not {self.place.world}"
                )
            loss_sum, count = part["sums"][self.place.rank]
            self.resumed = EpochSoFar(int(part["batch"]), loss_sum, int(count), float(part["time_s"]))
        if self.place.main:
            print(f"resuming from {path}: {self._where(self.start_epoch, self.resumed.batches)}", file=sys.stderr)

    def _where(self, epochs_done: int, batch: int) -> str:
        # The last step done: a checkpoint between epochs stands at the end of the last one.
        step = epochs_done * self.batches + batch
        epoch, batch = (epochs_done, self.batches) if batch == 0 else (epochs_done + 1, batch)
        return f"epoch {epoch}, batch {batch} (of {self.batches}), step {step}"

    def _checkpoint(self, epochs_done: int, so_far: EpochSoFar = NOT_BEGUN) -> None:
        """Everything a resume needs, after ``epochs_done`` epochs and ``so_far.batches`` batches of the next."""
        part = None
        if so_far.batches:
            sums = self.place.gather([so_far.loss_sum, so_far.count], self.device)
            part = {"batch": so_far.batches, "sums": sums, "time_s": so_far.time_s, "world": self.place.world}
        if self.place.main:
            state = {
                "epoch": epochs_done,
                "in_epoch": part,
                "model": self.net.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "rng": rng_state(),
                "history": self.history,
                "config": self.config.to_dict(),
                "wall_time_s": self._wall(),
                "peak_memory_bytes": self._peak_memory(),
            }
            write_atomic(self.out / CHECKPOINT, functools.partial(torch.save, state))
        self.place.barrier()

    def _stop_if_asked(self, epochs_done: int, so_far: EpochSoFar = NOT_BEGUN) -> None:
        signum = self._stop_signal()
        if signum is None:
            return
        if so_far.batches:  # between epochs, the epoch's own checkpoint was just written
            self._checkpoint(epochs_done, so_far)
        if self.place.main:
            tqdm.write(
                f"stopped by {signal.Signals(signum).name} at {self._where(epochs_done, so_far.batches)}; "
                f"checkpoint: {self.out / CHECKPOINT} (the same command resumes from it)",
                file=sys.stderr,
            )
        raise Stopped(signum)

    def _stop_signal(self) -> int | None:
        # Every process stops after the same step (one that stopped alone would leave the others waiting in a
        # collective), so they agree: the run stops when any process got a signal.
        got = self.place.sum([float(self.stop.signum == s) for s in STOP_SIGNALS], self.device)
        return next((s for s, n in zip(STOP_SIGNALS, got, strict=True) if n), None)

    # --- training ----------------------------------------------------------------------------------------------

    def run(self, resume: bool) -> dict[str, Any]:
        with out_locked(self.out) if self.place.main else contextlib.nullcontext():
            return self._run(resume)

    def _run(self, resume: bool) -> dict[str, Any]:
        resuming = resume and (self.out / CHECKPOINT).is_file()
        if self.place.main:
            remove_stale_temporaries(self.out)
            if not resuming:  # afresh: an earlier run's results must not stand beside this run's checkpoints
                remove_results(self.out)
        self.place.barrier()
        if resuming:
            self._resume()
        self.started = time.perf_counter()
        with self.stop.caught():
            for epoch in range(self.start_epoch, self.config.epochs):
                record = self._epoch(epoch)
                self.history.append(record)
                if self.place.main:
                    print(
                        f"epoch {epoch + 1}/{self.config.epochs}: train loss {record['train_loss']:.4f}, "
                        f"test loss {record['test_loss']:.4f}, top-1 {record['top1']:.2f}%",
                        file=sys.stderr,
                    )
                self._checkpoint(epoch + 1)
                self._stop_if_asked(epoch + 1)
        metrics = self._metrics(self._wall())
        if self.place.main:
            model = {
                "model": self.config.model,
                "num_classes": self.num_classes,
                "classes": self.config.to_dict()["classes"],
                "state_dict": state_dict_for_plain(self.net),
            }
            write_atomic(self.out / MODEL, functools.partial(torch.save, model))
            write_json_atomic(self.out / METRICS, metrics, sort_keys=True)
            if not self.config.keep_checkpoint:  # the run is done: model.pt holds its weights
                (self.out / CHECKPOINT).unlink(missing_ok=True)
        self.place.barrier()
        return metrics

    @contextlib.contextmanager
    def _gpu_alone(self) -> Iterator[None]:
        # A job sharing its GPU under `hot slots --steps-alone` computes (trains, evaluates) with the GPU to itself;
        # it hands the device over idle and with its cached memory returned.
        with steps_alone() as held:
            try:
                yield
            finally:
                if held and self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                    torch.cuda.empty_cache()

    def _wall(self) -> float:
        return self.wall_before + time.perf_counter() - self.started

    def _epoch(self, epoch: int) -> dict[str, Any]:
        c = self.config
        bits = None
        if self.hot_config is not None:
            bits = WARMUP_BITS if epoch < c.int8_warmup_epochs else self.hot_config.gx_bits
            set_config(self.net, gx_bits=bits)
        so_far = self.resumed if epoch == self.start_epoch else NOT_BEGUN
        t0 = time.perf_counter() - so_far.time_s
        batches = iter(self._train_loader(epoch))
        if so_far.batches:
            # Load, not train on, the batches done before the stop: the loader's order and its workers' augmentation
            # streams then stand where they stood. Loading in-process draws augmentation from the global RNG,
            # which the checkpoint holds as it was after those batches: kept.
            with rng_kept():
                for _ in itertools.islice(batches, so_far.batches):
                    pass
        if steps_alone_requested() and self.batches < self.per_epoch:
            # A capped epoch's batches are made before the GPU is taken, so that the other runs sharing it do not
            # wait for this one's data. Their augmentation draws then precede the steps' random draws: such a run
            # repeats itself, but not bit for bit the same run made unshared.
            batches = iter(list(itertools.islice(batches, self.batches - so_far.batches)))
        with self._gpu_alone():
            self.model.train()
            loss_sum, count = so_far.loss_sum, so_far.count
            steps: list[float] = []  # each training step's time, its data loading not included
            progress = Progress(self.progress, epoch, c.epochs, self.batches, so_far.batches)
            with contextlib.closing(progress):
                # zip asks the range first: no batch past the epoch's last is loaded (it would draw augmentation RNG)
                for step, (x, y) in zip(range(so_far.batches, self.batches), batches, strict=False):
                    calibrating = self._needs_lqs() and epoch == 0 and step == 0
                    started = time.perf_counter()
                    with lqs.calibrate(self.net) if calibrating else contextlib.nullcontext():
                        loss = self._step(x, y, epoch, step, epoch * self.batches + step)
                    steps.append(time.perf_counter() - started)  # _step waits for the device (it reads the loss)
                    if calibrating:
                        self._share_lqs()
                    loss_sum, count = loss_sum + loss * len(y), count + len(y)
                    progress.update(step + 1, loss_sum / count)
                    self._stop_if_asked(epoch, EpochSoFar(step + 1, loss_sum, count, time.perf_counter() - t0))
            loss_sum, count = self.place.sum([loss_sum, count], self.device)
            lr = self.optimizer.param_groups[0]["lr"]
            self.scheduler.step()
            test_loss, top1 = self._evaluate()
        return {
            "epoch": epoch + 1,
            "train_loss": loss_sum / count,
            "test_loss": test_loss,
            "top1": top1,
            "lr": lr,
            "gx_bits": bits,
            "train_batches": self.batches,
            "batches_per_epoch": self.per_epoch,  # uncapped: what max_train_batches cut the epoch from
            "step_time_s": statistics.median(steps) if steps else None,  # median: the first steps warm up
            "time_s": time.perf_counter() - t0,
        }

    def _needs_lqs(self) -> bool:
        return self.hot_config is not None and self.hot_config.lqs

    def _share_lqs(self) -> None:
        # Rank 0's decisions are the run's: written once, then read back by every process.
        if self.place.main:
            lqs.save_decisions(self.net, self.out / LQS)
        self.place.barrier()
        lqs.load_decisions(self.net, self.out / LQS)

    def _autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.amp)

    def _step(self, x: torch.Tensor, y: torch.Tensor, epoch: int, step: int, global_step: int) -> float:
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        if self.mixup is not None:
            x, y = self.mixup(x, y)
        with self._autocast():
            loss = self.criterion(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # One wait for the device a step: the loss and the gradient norm are read together, after the backward is
        # queued (a non-finite loss is still reported as such, and no optimizer step is taken after either).
        grads = [p.grad for _, p in self.params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads) if grads else loss.new_zeros(())
        value, grad_norm = torch.stack([loss.detach().float(), norm.float()]).tolist()
        where = f"epoch {epoch + 1}, step {step} (global step {global_step})"
        bad_loss, bad_grads = self.place.sum(
            [float(not math.isfinite(value)), float(not math.isfinite(grad_norm))], self.device
        )
        if bad_loss:
            raise NonFiniteError(f"non-finite loss ({value}) at {where}")
        if bad_grads:
            self._name_non_finite_gradient(where)
        self.optimizer.step()
        return value

    def _name_non_finite_gradient(self, where: str) -> None:
        for name, p in self.params:  # the first offender, in module order (backward runs the other way)
            if p.grad is not None and not torch.isfinite(p.grad).all():
                raise NonFiniteError(
                    f"non-finite gradient in parameter {name!r} (layer {name.rpartition('.')[0]!r}) at {where}"
                )
        raise NonFiniteError(f"non-finite gradient norm at {where}")

    @torch.no_grad()
    def _evaluate(self) -> tuple[float, float]:
        self.net.eval()
        # Sums kept on the device and read once, batches copied without waiting (a read or a blocking copy per batch
        # waits for the device each time, and a GPU shared by several runs makes each wait long); float64, as the
        # Python floats they replace: the same numbers.
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss, correct
        count = 0.0
        for x, y in self._test_loader():
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with self._autocast():
                logits = self.net(x).float()
            sums[0] += nn.functional.cross_entropy(logits, y, reduction="sum").double()
            sums[1] += (logits.argmax(1) == y).sum()
            count += len(y)
        loss_sum, correct = sums.tolist()
        loss_sum, correct, count = self.place.sum([loss_sum, correct, count], self.device)
        return loss_sum / count, 100.0 * correct / count

    # --- results -----------------------------------------------------------------------------------------------

    def _peak_memory(self) -> int:
        if self.device.type == "cuda":
            return max(self.peak_before, int(torch.cuda.max_memory_allocated(self.device)))
        return max(self.peak_before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # Linux: KiB

    def _metrics(self, wall: float) -> dict[str, Any]:

        top1 = [r["top1"] for r in self.history]
        best = max(range(len(top1)), key=top1.__getitem__) if top1 else None
        decisions = lqs.decisions(self.net) if self._needs_lqs() else None
        return {
            "epochs": self.history,
            "final_top1": top1[-1] if top1 else None,
            "best_top1": top1[best] if best is not None else None,
            "best_epoch": best + 1 if best is not None else None,
            "wall_time_s": wall,
            "peak_memory_bytes": self._peak_memory(),
            "peak_memory_kind": "cuda_max_allocated" if self.device.type == "cuda" else "cpu_max_rss",
            "device": str(self.device),
            "world_size": self.place.world,
            "num_classes": self.num_classes,
            "image_size": self.image_size,
            "train_samples": len(self.train_set),
            "test_samples": len(self.test_set),
            "trainable_parameters": sum(p.numel() for _, p in self.params),
            "hot_layers": [name for name, _ in hot_layers(self.net)],
            # which backend ran the HOT layers' backward (backend auto chooses per call)
            "hot_backends": sorted({layer.hot_state.backend for _, layer in hot_layers(self.net)} - {None}),
            "lqs": decisions,
            "environment": environment(),
            "config": self.config.to_dict(),
        }
