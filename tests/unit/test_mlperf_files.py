"""MLPerf Storage's and DLIO's own workload files, as written (issue 25): v3.0's unet3d_b200, retinanet_b200,
retinanet_mi355 and llama3_8b, and v2.0's unet3d_h100, whose checkpoint fires only after the last epoch.

The files are copies (tests/fixtures/dlio/NOTICE.txt says from where, and their licence).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign_mod
from iolab.kinds.dlio import workload as dlio

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "dlio"
V2_UNET3D = FIXTURES / "mlperf-v2.0-unet3d_h100.yaml"

# file → what the dry run says each host runs
AS_WRITTEN = {
    "mlperf-v3-unet3d_b200.yaml": "reader npz, 4 workers, batch 7, decode on, 5 epoch(s), 1 emulated b200 (0.162 s",
    "mlperf-v3-retinanet_b200.yaml": "reader pil, 8 workers, batch 24, decode on, 8 epoch(s), 1 emulated b200 (0.04755",
    "mlperf-v3-retinanet_mi355.yaml": "reader pil, 8 workers, batch 32, decode on, 8 epoch(s), 1 emulated mi355 (0.063",
    "mlperf-v3-llama3_8b.yaml": "llama3-8b",
    "mlperf-v2.0-unet3d_h100.yaml": "the file's checkpoint (checkpoint_after_epoch 5, 5 epochs) fires once, after the "
    "last epoch's reads, in DLIO: iolab leaves it out",
}


@pytest.mark.parametrize("name", list(AS_WRITTEN))
def test_mlperfs_own_workload_files_dry_run_as_written(name, tmp_path):
    """`bench.all --workload-file` loads the file unchanged and its dry run says what each host runs (on local
    disk: llama3-8b's checkpoint, 105 GB as written, fits no small tmpfs)."""
    from support import Cli

    path = tmp_path / "files.yml"
    path.write_text(yaml.safe_dump({"name": "files", "backends": [{"name": "d", "type": "local", "path": "/var/tmp"}]}))
    spec = campaign_mod.load(path, workload_file=FIXTURES / name)
    assert spec.name == f"files-{Path(name).stem.replace('_', '-')}" and len(spec.workloads) == 1
    done = Cli(tmp_path / "results")(
        "bench.all", "--campaign", str(path), "--workload-file", str(FIXTURES / name), "--dry-run"
    )
    described = [line for line in done.stdout.splitlines() if "on each host:" in line]
    assert described and AS_WRITTEN[name] in described[0], done.stdout
    assert not (tmp_path / "results").exists()  # nothing ran, nothing stored


def test_a_checkpoint_that_never_fires_is_accepted_and_said():
    config = yaml.safe_load(V2_UNET3D.read_text())
    config["checkpoint"]["checkpoint_after_epoch"] = 6
    workload, _, _ = dlio.workload(config, "u")
    assert "(checkpoint_after_epoch 6, 5 epochs) fires never in DLIO" in workload["file_note"]
    raw = {"name": "t", "backends": [{"name": "tmpfs", "type": "tmpfs", "size": "1GiB"}], "workloads": [workload]}
    (parsed,) = campaign_mod.parse({**raw, "dataset": {"kind": "unet3d", "files": 8}}, "t.yml", FIXTURES).workloads
    assert parsed.file_note in parsed.describe() and "file_note" not in parsed.params()  # said, not a parameter


@pytest.mark.parametrize(
    "change, key",
    [
        ({("checkpoint", "checkpoint_after_epoch"): 2}, "checkpoint.checkpoint_after_epoch"),
        ({("checkpoint", "checkpoint_after_epoch"): None}, "checkpoint.checkpoint_after_epoch"),  # DLIO's 1
        ({("checkpoint", "steps_between_checkpoints"): 100}, "checkpoint.steps_between_checkpoints"),
        ({("workflow", "evaluation"): True}, "workflow.evaluation"),
        ({("workflow", "checkpoint"): "yes"}, "workflow.checkpoint"),
    ],
)
def test_checkpoints_during_training_and_evaluation_are_refused_naming_the_key(change, key):
    config = copy.deepcopy(yaml.safe_load(V2_UNET3D.read_text()))
    for (section, name), value in change.items():
        if value is None:
            del config[section][name]
        else:
            config[section][name] = value
    with pytest.raises(dlio.Refused, match=f"^{re.escape(key)}: ") as info:
        dlio.workload(config, "u")
    assert "\n" not in str(info.value)


def test_evaluation_settings_are_unused_with_evaluation_off():
    """DLIO reads the evaluation section and batch_size_eval only when workflow.evaluation is on."""
    config = yaml.safe_load(V2_UNET3D.read_text())
    config["reader"]["batch_size_eval"] = 128
    config["evaluation"] = {"eval_time": 0.5, "epochs_between_evals": 1}
    workload, _, _ = dlio.workload(config, "u")
    assert workload["workload"] == "unet3d" and workload["batch_size"] == 7
