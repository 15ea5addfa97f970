"""A small MLP for tests and quick experiments: ``depth`` x (Linear(width, width) + ReLU) and a head."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """``in_features -> width`` (when different), ``depth`` hidden Linear+ReLU layers, ``Linear(width, num_classes)``."""

    def __init__(self, *, in_features: int = 256, width: int = 256, depth: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        dim = in_features
        for _ in range(depth):
            layers += [nn.Linear(dim, width), nn.ReLU()]
            dim = width
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(x))
