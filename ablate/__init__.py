"""ablate: Transformer ablation studies. Swap one component, train, compare."""

from ablate.config import load_config
from ablate.model import attention_weights, build_model, count_parameters
from ablate.registry import register

__all__ = ["attention_weights", "build_model", "count_parameters", "load_config", "register"]
__version__ = "0.1.0"
