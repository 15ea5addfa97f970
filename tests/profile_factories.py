"""Model factories in the ``package.module:factory`` form, for the profile-import tests."""

from __future__ import annotations


def resnet50_module():
    """ddpsim's ResNet-50 as a bare ``nn.Module`` (as ``torchvision.models:resnet50`` returns it)."""
    from ddpsim.trace.models import build_model

    return build_model("resnet50").module
