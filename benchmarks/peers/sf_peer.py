"""Sample Factory 2.1.1 APPO: training throughput, and its sampling figure.

Sample Factory 2.x has no random-policy sampling mode (1.x's dummy sampler is gone), so the
"sampling" figure is an APPO run's own collection rate: env steps with inference and a learner
running, an upper bound the learner allows, not the env-only work the others do. Both figures come
from its `sf_log.txt`: frames between the first "Fps is" report with frames and the last, over
their log timestamps (start-up left out, as for srl). Envs are registered with the same makers as
the other peers (benchmarks/peers/_child.py), so the work per step is the same; env_frameskip=1
because our wrapper skips frames, so frames are agent steps. Run as a script it is the child:
`sf_peer.py sample|train ENV ENV_STEPS`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

VENV = "sample_factory"
# 2.1.1 needs gymnasium < 1.0 and numpy < 2; ale-py < 0.10 still works with gymnasium 0.29.
PACKAGES = ["sample-factory==2.1.1", "gymnasium<1.0", "numpy<2", "ale-py<0.10", "opencv-python-headless"]
PROBE = ["sample-factory", "gymnasium", "numpy", "torch", "ale-py"]
# Its sampling run gets an env-step budget sized to last about the requested seconds on an idle
# 2-core VM (its --train_for_seconds did not end a run here); the rate is measured all the same.
SAMPLE_STEPS_PER_S = {"cartpole": 3000, "pong": 250}
FPS_LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*?Fps is .*?Total num frames: (\d+)")
# Same per-update work as srl's cartpole-ppo and the RLlib side (see rllib_peer.SETTINGS); no RNN.
COMMON = ["--device=cpu", "--num_workers=2", "--worker_num_splits=2", "--use_rnn=False", "--with_wandb=False",
          "--save_every_sec=100000", "--decorrelate_experience_max_seconds=0", "--env_frameskip=1", "--seed=0"]
SETTINGS = {
    "cartpole": ["--num_envs_per_worker=8", "--rollout=32", "--batch_size=512", "--num_batches_per_epoch=1",
                 "--num_epochs=10", "--encoder_mlp_layers", "64", "64", "--learning_rate=0.001", "--gamma=0.98"],
    "pong": ["--num_envs_per_worker=4", "--rollout=128", "--batch_size=256", "--num_batches_per_epoch=4",
             "--num_epochs=4", "--obs_scale=255.0", "--encoder_conv_architecture=convnet_atari",
             "--encoder_conv_mlp_layers", "512", "--learning_rate=0.0003"],
}


def run(mode: str, env: str, amount: float, timeout_s: float = 600) -> dict[str, Any]:
    from common import PeerError, ensure_venv, run_peer_script

    try:
        versions = ensure_venv(VENV, PACKAGES, PROBE)
    except PeerError as e:
        return {"error": str(e)}
    return {**run_peer_script(VENV, "sf_peer.py", [mode, env, str(amount)], timeout_s), "versions": versions}


def sample(env: str, seconds: float) -> dict[str, Any]:
    return run("sample", env, int(seconds * SAMPLE_STEPS_PER_S[env]))


def rate_from_log(text: str) -> dict[str, Any]:
    """Frames per second between the first "Fps is" report with frames and the last."""
    points = []
    for stamp, frames in FPS_LINE.findall(text):
        points.append((dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp(), int(frames)))
    started = next((p for p in points if p[1] > 0), None)
    if started is None or points[-1] == started or points[-1][0] <= started[0]:
        return {"error": "fewer than two Fps reports with frames in sf_log.txt"}
    seconds = points[-1][0] - started[0]
    steps = points[-1][1] - started[1]
    return {"env_steps_per_s": round(steps / seconds, 1), "measured_s": round(seconds, 3), "env_steps": points[-1][1]}


PROFILE_HEAD = re.compile(r"(?:^|\])\s*([^\]]+?) profile tree view:\s*$")  # "[stamp][pid] Learner 0 profile ..."
PROFILE_ITEM = re.compile(r"(\w+): (\d+(?:\.\d+)?)")


def profile_from_log(text: str) -> dict[str, dict[str, float]]:
    """Sample Factory's own busy seconds per component, from the "<component> profile tree view:"
    blocks its components log when they stop (rollout workers' env_step, the inference worker's
    forward and obs_to_device, the learner's train, ...): component -> name -> seconds, each
    name's first (outermost) figure."""
    out: dict[str, dict[str, float]] = {}
    current: dict[str, float] | None = None
    for line in text.splitlines():
        head = PROFILE_HEAD.search(line)
        if head:
            current = out.setdefault(head.group(1), {})
        elif current is not None and not line.startswith("["):  # the block's lines carry no timestamp
            for name, seconds in PROFILE_ITEM.findall(line):
                current.setdefault(name, float(seconds))
        else:
            current = None
    return out


FRAME_STACK = {"sample": 1, "train": 4}  # training sees 4 stacked frames, as srl's pong-ppo does


def _make(full_env_name: str, cfg: Any = None, env_config: Any = None, render_mode: Any = None) -> Any:
    from _child import make_env

    frame_stack = int(os.environ.get("PEER_FRAME_STACK", "1"))  # set by child(); the workers inherit it
    return make_env(full_env_name.removeprefix("peer_"), channel_first=True, frame_stack=frame_stack)


def child(mode: str, env: str, amount: float) -> None:
    from _child import emit
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.envs.env_utils import register_env
    from sample_factory.train import run_rl

    train_dir = Path(os.environ.get("PEER_TMP", "/tmp")) / "sf"
    budget = [f"--train_for_env_steps={int(amount)}"]
    if mode == "sample":  # one epoch per batch: the learner holds collection back as little as it can
        budget.append("--num_epochs=1")
    # PEER_SF_ARGS (a JSON list) comes last, so it overrides the above: benchmarks/gpu.py sets the
    # device, the workers and the batch there (argparse keeps an option's last value)
    extra = json.loads(os.environ.get("PEER_SF_ARGS", "[]"))
    argv = [f"--env=peer_{env}", "--experiment=peer", f"--train_dir={train_dir}", *COMMON, *SETTINGS[env], *budget, *extra]
    os.environ["PEER_FRAME_STACK"] = str(FRAME_STACK[mode])
    register_env(f"peer_{env}", _make)
    parser, _ = parse_sf_args(argv=argv)
    status = run_rl(parse_full_cfg(parser, argv))
    text = (train_dir / "peer" / "sf_log.txt").read_text(errors="replace")
    result = {**rate_from_log(text), "profile_s": profile_from_log(text)}
    what = "APPO collection rate, 1 epoch per batch" if mode == "sample" else "APPO training"
    emit({"peer": "sample factory", "mode": what, "status": int(status), **result})


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], float(sys.argv[3]))
