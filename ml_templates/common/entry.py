"""What every template's entry points share: loading a job's ``Datapath/dataloader.py``, starting
a training run from its ``train_config.json`` (seeded, threads, output folder), and the main of a
dataloader checker (run the check, report a failure to import the dataloader as a failure, write
``Datapath/dataloader_check.json``)."""
from __future__ import annotations

import argparse
import importlib.util
import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def load_dataloader(path: str | Path):
    """Import a job's Datapath/dataloader.py as a module."""
    spec = importlib.util.spec_from_file_location("job_dataloader", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Run:
    cfg: dict
    datapath: Path
    out: Path
    seed: int
    started: float = field(default_factory=time.time)

    def dataloader(self):
        return load_dataloader(Path(self.cfg.get("dataloader") or self.datapath / "dataloader.py"))


def start_run(argv: list[str] | None, description: str | None = None,
              determinism: bool = False) -> Run:
    """Parse ``--config``, seed every generator (MONAI's determinism too when asked), set the
    thread count and create the output folder."""
    import torch
    from transformers import set_seed

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True)
    cfg = json.loads(Path(parser.parse_args(argv).config).read_text())
    started = time.time()
    seed = int(cfg.get("seed", 42))
    set_seed(seed)
    if determinism:
        from monai.utils import set_determinism
        set_determinism(seed=seed)
    torch.set_num_threads(max(1, int(cfg.get("threads", torch.get_num_threads()))))
    out = Path(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    return Run(cfg, Path(cfg["datapath"]), out, seed, started)


def check_main(check: Callable[[Path], dict], argv: list[str] | None = None,
               printed: tuple[str, ...] = ("expected", "loaded", "shapes")) -> int:
    """``--datapath DIR``: run ``check(datapath)``, write the report, print its headline."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--datapath", required=True)
    datapath = Path(parser.parse_args(argv).datapath)
    try:
        report = check(datapath)
    except Exception:
        report = {"expected": {}, "loaded": {}, "shapes": [],
                  "failed": ["the dataloader could not be imported or built:\n"
                             + traceback.format_exc(limit=5)]}
    (datapath / "dataloader_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: report.get(k) for k in printed}))
    return 0 if not report["failed"] else 1
