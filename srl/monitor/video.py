"""MP4 of evaluation episodes from an env's rgb_array frames (`srl eval RUN_DIR --video FILE.mp4`).

Needs imageio with its ffmpeg plugin (`pip install 'srl[video]'`: the imageio-ffmpeg wheel ships an
ffmpeg binary) and the env's own renderer (pygame for Gymnasium's classic-control envs).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from srl.config import ConfigError

SUFFIX = ".mp4"


def check_video_path(path: Path) -> None:
    """ConfigError unless `path` is an .mp4 and imageio with ffmpeg is installed (before any work)."""
    if path.suffix.lower() != SUFFIX:
        raise ConfigError(f"--video {str(path)!r}: the file must end in {SUFFIX}")
    try:
        import imageio.v2  # noqa: F401
        import imageio_ffmpeg  # noqa: F401  (imageio finds its ffmpeg binary through it)
    except ImportError:
        raise ConfigError("--video needs imageio and imageio-ffmpeg: pip install 'srl[video]'") from None


RGB_ARRAY = "rgb_array"


def no_frames(env_name: str, why: str) -> ConfigError:
    """The one-line error for an env that cannot give --video its frames: what is missing, what to do."""
    return ConfigError(
        f"--video: env {env_name!r} cannot render {RGB_ARRAY} frames ({why}); run srl eval without --video, "
        f"or give the env class metadata['render_modes'] with {RGB_ARRAY!r}, a render_mode argument, and a "
        "render() that returns an H x W x 3 array"
    )


def check_renders_rgb_array(env_name: str, env_kwargs: Mapping[str, Any]) -> None:
    """ConfigError, before the env is made, when the Gymnasium env class does not list rgb_array in
    its metadata['render_modes'] (made with render_mode='rgb_array' it would fail with a traceback:
    an unexpected keyword argument, or Gymnasium's env checker's assertion)."""
    gym_id = str(env_kwargs.get("id", "")) if env_name == "gymnasium" else env_name
    module, _, name = gym_id.rpartition(":")  # "module:EnvId": the module registers EnvId
    try:
        if module:
            importlib.import_module(module)
        spec = gym.spec(name)
        entry = spec.entry_point
        creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    except (gym.error.Error, ImportError, AttributeError):
        return  # making the env reports what is wrong with its id
    modes = (getattr(creator, "metadata", None) or {}).get("render_modes")
    if modes is not None and RGB_ARRAY not in modes:
        raise no_frames(env_name, f"its metadata['render_modes'] is {list(modes)}")


class FrameRecorder:
    """Appends the env's current rgb_array frame to an MP4 at each `capture()`."""

    def __init__(self, path: Path, env: gym.Env, env_name: str) -> None:
        import imageio.v2 as imageio  # there: evaluate_run checked for it (check_video_path) before any work

        # pygame draws off-screen for rgb_array; without a display or sound it would complain on stderr
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        self.env = env
        self.path = path
        self.env_name = env_name  # for errors
        self.frames = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        fps = env.metadata.get("render_fps") or 30
        # macro_block_size=1: keep the rendered size (even_frame makes it what H.264 accepts)
        self.writer = imageio.get_writer(str(path), fps=fps, codec="libx264", macro_block_size=1, quality=7)

    def capture(self) -> None:
        try:
            frame = self.env.render()
        except gym.error.DependencyNotInstalled as e:  # classic-control envs draw with pygame
            raise ConfigError(f"--video: the env cannot render: {e}") from None
        if frame is None:  # render_mode accepted, but render() draws nothing
            raise no_frames(self.env_name, "render() returned None")
        self.writer.append_data(even_frame(frame))
        self.frames += 1

    def close(self) -> None:
        self.writer.close()
        if self.frames == 0:  # the env failed to draw its first frame: no empty video left behind
            self.path.unlink(missing_ok=True)


def rendering_env(venv: Any, env_name: str) -> gym.Env:
    """The Gymnasium env behind a one-env srl VectorEnv built with render_mode='rgb_array'."""
    envs = getattr(venv, "envs", None) or []
    env = envs[0] if envs else None
    env = getattr(env, "env", env)  # a GymEnvironment wraps its gym.Env as .env
    if not isinstance(env, gym.Env) or env.render_mode != RGB_ARRAY:
        raise no_frames(env_name, f"made with render_mode={RGB_ARRAY!r}, its render_mode is "
                                  f"{getattr(env, 'render_mode', None)!r}")
    return env


def even_frame(frame: Any) -> np.ndarray:
    """H x W x 3 uint8 cropped to even height and width (what H.264's yuv420p needs)."""
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise ValueError(f"expected an H x W x 3 rgb_array frame, got shape {frame.shape}")
    height, width = frame.shape[0] // 2 * 2, frame.shape[1] // 2 * 2
    return np.ascontiguousarray(frame[:height, :width, :3], dtype=np.uint8)
