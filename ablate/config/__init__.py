"""Config: the typed schema, YAML composition with dotted overrides, and validation."""

from ablate.config.load import load_config
from ablate.config.schema import Arch, DataConfig, ModelConfig, RunConfig, TrainConfig

__all__ = ["Arch", "DataConfig", "ModelConfig", "RunConfig", "TrainConfig", "load_config"]
